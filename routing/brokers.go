package routing

import (
	"cmp"
	"slices"
)

// brokerSet is an immutable set of live brokers, rebuilt on each membership
// change (brokers join and leave rarely, and there are at most thousands).
type brokerSet struct {
	sorted []Broker     // by id
	hashes []brokerHash // in id order
	// dense answers live() for ids in [0, len(dense)) without a map lookup;
	// sparse says whether some live id lies outside that range.
	dense  []bool
	sparse bool
}

type brokerHash struct {
	id int32
	h  uint64
}

// maxDenseID bounds the dense liveness index (64 KiB).
const maxDenseID = 1 << 16

func newBrokerSet(byID map[int32]Broker) *brokerSet {
	sorted := make([]Broker, 0, len(byID))
	for _, b := range byID {
		sorted = append(sorted, b)
	}
	slices.SortFunc(sorted, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	return fromSorted(sorted)
}

// fromSorted builds the set from brokers sorted by id, without duplicates.
func fromSorted(sorted []Broker) *brokerSet {
	s := &brokerSet{sorted: sorted}
	maxID := int32(-1)
	for _, b := range sorted {
		if b.ID >= 0 && b.ID < maxDenseID {
			maxID = max(maxID, b.ID)
		} else {
			s.sparse = true
		}
	}
	s.dense = make([]bool, maxID+1)
	s.hashes = make([]brokerHash, len(sorted))
	for i, b := range sorted {
		if b.ID >= 0 && b.ID < maxDenseID {
			s.dense[b.ID] = true
		}
		s.hashes[i] = brokerHash{id: b.ID, h: brokerSeed(b.ID)}
	}
	return s
}

func (s *brokerSet) live(id int32) bool {
	if id >= 0 && int64(id) < int64(len(s.dense)) {
		return s.dense[id]
	}
	if !s.sparse {
		return false
	}
	_, ok := s.find(id)
	return ok
}

func (s *brokerSet) get(id int32) (Broker, bool) {
	if i, ok := s.find(id); ok {
		return s.sorted[i], true
	}
	return Broker{}, false
}

func (s *brokerSet) find(id int32) (int, bool) {
	return slices.BinarySearchFunc(s.sorted, id, func(b Broker, id int32) int { return cmp.Compare(b.ID, id) })
}

// with returns a copy of s with b added or replaced.
func (s *brokerSet) with(b Broker) *brokerSet {
	i, found := s.find(b.ID)
	sorted := make([]Broker, 0, len(s.sorted)+1)
	sorted = append(sorted, s.sorted[:i]...)
	sorted = append(sorted, b)
	if found {
		i++
	}
	sorted = append(sorted, s.sorted[i:]...)
	return fromSorted(sorted)
}

// without returns a copy of s without id.
func (s *brokerSet) without(id int32) *brokerSet {
	i, found := s.find(id)
	if !found {
		return s
	}
	sorted := make([]Broker, 0, len(s.sorted))
	sorted = append(sorted, s.sorted[:i]...)
	sorted = append(sorted, s.sorted[i+1:]...)
	return fromSorted(sorted)
}

// rendezvous returns the live broker other than avoid with the highest score
// for key (highest random weight hashing). Scores depend only on the key and
// the broker, so removing a broker moves only the keys it had, and every
// proxy with the same live set picks the same broker.
func (s *brokerSet) rendezvous(key uint64, avoid Avoid) (int32, bool) {
	best, bestScore, found := int32(-1), uint64(0), false
	for _, b := range s.hashes {
		if avoid.Has(b.id) {
			continue
		}
		sc := mix64(key ^ b.h)
		if !found || sc > bestScore {
			best, bestScore, found = b.id, sc, true
		}
	}
	return best, found
}

// Hashing is fixed (not seeded per process) so that every proxy replica
// computes the same rendezvous choice.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211

	domainPartition = 0x9e3779b97f4a7c15
	domainGroup     = 0xc2b2ae3d27d4eb4f
	domainAny       = 0x165667b19e3779f9
	domainBroker    = 0x27d4eb2f165667c5
)

func fnv64(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is the splitmix64 finalizer: a bijection with good avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func partitionKey(topic string, p int32) uint64 {
	return mix64(fnv64(topic)^domainPartition) ^ uint64(uint32(p))*domainGroup
}

func groupKey(group string) uint64 { return mix64(fnv64(group) ^ domainGroup) }

func anyKey(key string) uint64 { return mix64(fnv64(key) ^ domainAny) }

func brokerSeed(id int32) uint64 { return mix64(uint64(uint32(id)) ^ domainBroker) }
