package routing

import "sort"

// brokerSet is an immutable set of live brokers, rebuilt on each membership
// change (brokers join and leave rarely, and there are at most thousands).
type brokerSet struct {
	byID   map[int32]Broker
	sorted []Broker
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
	if byID == nil {
		byID = map[int32]Broker{}
	}
	s := &brokerSet{byID: byID, sorted: make([]Broker, 0, len(byID))}
	maxID := int32(-1)
	for _, b := range byID {
		s.sorted = append(s.sorted, b)
		if b.ID >= 0 && b.ID < maxDenseID {
			maxID = max(maxID, b.ID)
		} else {
			s.sparse = true
		}
	}
	sort.Slice(s.sorted, func(i, j int) bool { return s.sorted[i].ID < s.sorted[j].ID })
	s.dense = make([]bool, maxID+1)
	s.hashes = make([]brokerHash, len(s.sorted))
	for i, b := range s.sorted {
		if b.ID >= 0 && b.ID < maxDenseID {
			s.dense[b.ID] = true
		}
		s.hashes[i] = brokerHash{id: b.ID, h: brokerSeed(b.ID)}
	}
	return s
}

func (s *brokerSet) live(id int32) bool {
	if uint64(uint32(id)) < uint64(len(s.dense)) && id >= 0 {
		return s.dense[id]
	}
	if !s.sparse {
		return false
	}
	_, ok := s.byID[id]
	return ok
}

// with returns a copy of s with b added or replaced.
func (s *brokerSet) with(b Broker) *brokerSet {
	m := make(map[int32]Broker, len(s.byID)+1)
	for id, v := range s.byID {
		m[id] = v
	}
	m[b.ID] = b
	return newBrokerSet(m)
}

// without returns a copy of s without id.
func (s *brokerSet) without(id int32) *brokerSet {
	m := make(map[int32]Broker, len(s.byID))
	for k, v := range s.byID {
		if k != id {
			m[k] = v
		}
	}
	return newBrokerSet(m)
}

// rendezvous returns the live broker other than avoid with the highest score
// for key (highest random weight hashing). Scores depend only on the key and
// the broker, so removing a broker moves only the keys it had, and every
// proxy with the same live set picks the same broker.
func (s *brokerSet) rendezvous(key uint64, avoid int32) (int32, bool) {
	best, bestScore, found := int32(-1), uint64(0), false
	for _, b := range s.hashes {
		if b.id == avoid {
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
