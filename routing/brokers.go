package routing

import (
	"cmp"
	"slices"

	"github.com/kproxy/kproxy/layout"
)

// brokerSet is an immutable set of live brokers, rebuilt on each membership
// change (brokers join and leave rarely, and there are at most thousands).
type brokerSet struct {
	sorted []Broker                   // by id
	seeds  []layout.Seeded            // rendezvous seeds, in id order
	zones  map[string][]layout.Seeded // seeds of the brokers with a rack, by rack (zones.go)
	// dense answers live() for ids in [0, len(dense)) without a map lookup;
	// sparse says whether some live id lies outside that range.
	dense  []bool
	sparse bool
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
	s.seeds = make([]layout.Seeded, len(sorted))
	for i, b := range sorted {
		if b.ID >= 0 && b.ID < maxDenseID {
			s.dense[b.ID] = true
		}
		s.seeds[i] = layout.Seed(b.ID)
	}
	s.zones = zonesOf(sorted, s.seeds)
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

// rendezvous returns the live broker other than those avoided with the
// highest score for key (layout.Rendezvous: every proxy and every broker with
// the same live set picks the same broker).
func (s *brokerSet) rendezvous(key uint64, avoid Avoid) (int32, bool) {
	return layout.Rendezvous(key, s.seeds, avoid.ids[:avoid.n])
}
