package routing

import "github.com/kproxy/kproxy/layout"

// Avoid is the set of brokers a retry should not go back to: every broker
// that refused during one request, so that retries move on to brokers not
// yet tried instead of alternating between two refusers. It remembers the
// most recent maxAvoid refusers; the zero value avoids nothing. It is a small
// value, passed by value without allocating.
type Avoid struct {
	ids [maxAvoid]int32 // oldest first
	n   uint8
}

const maxAvoid = 8

// AvoidOne avoids a single broker; a negative id avoids nothing.
func AvoidOne(id int32) Avoid {
	var a Avoid
	a.Add(id)
	return a
}

// Add remembers a refuser as the most recent one; negative ids are ignored.
// When full, the oldest refuser is forgotten.
func (a *Avoid) Add(id int32) {
	if id < 0 {
		return
	}
	j := 0 // compact, dropping id if present
	for i := range int(a.n) {
		if a.ids[i] != id {
			a.ids[j] = a.ids[i]
			j++
		}
	}
	if j == maxAvoid {
		copy(a.ids[:], a.ids[1:])
		j--
	}
	a.ids[j] = id
	a.n = uint8(j + 1)
}

// Has reports whether id is avoided.
func (a Avoid) Has(id int32) bool {
	for i := range a.n {
		if a.ids[i] == id {
			return true
		}
	}
	return false
}

// Last is the most recent refuser, -1 if none.
func (a Avoid) Last() int32 {
	if a.n == 0 {
		return -1
	}
	return a.ids[a.n-1]
}

// RouteAvoiding is Route with a set to avoid. Avoiding is a preference, not
// an exclusion: when every live broker has refused, it forgets all but the
// last refuser, and when that leaves nothing (one live broker, the last
// refuser) it routes to it anyway. Ownership may have settled since the
// refusals (a dead owner's lease expires), and a partition nobody is asked
// to take stays unowned: clients wait for a metadata change that only a
// produce would cause. The caller's backoff spaces the retries. Owner-only
// routing (SetOwnerOnly) changes the rules for owned partitions.
func (t *Table) RouteAvoiding(topic string, p int32, avoid Avoid) (int32, bool) {
	st := t.st.Load()
	o, _ := unpack(st.ownership(topic, p))
	if b, ok, decided := t.ownerRoute(st, o); decided {
		return b, ok
	}
	if o >= 0 && !avoid.Has(o) && st.brokers.live(o) {
		return o, true
	}
	return st.brokers.rendezvousAvoiding(layout.PartitionKey(topic, p), avoid)
}

// RouteGroupAvoiding is RouteGroup with a set to avoid, like RouteAvoiding.
func (t *Table) RouteGroupAvoiding(group string, avoid Avoid) (int32, bool) {
	st := t.st.Load()
	b, _ := unpack(st.groups.get(group))
	if o, ok, decided := t.ownerRoute(st, b); decided {
		return o, ok
	}
	if b >= 0 && !avoid.Has(b) && st.brokers.live(b) {
		return b, true
	}
	return st.brokers.rendezvousAvoiding(layout.GroupKey(group), avoid)
}

// AnyBrokerAvoiding is AnyBroker with a set to avoid, like RouteAvoiding.
func (t *Table) AnyBrokerAvoiding(key string, avoid Avoid) (int32, bool) {
	return t.st.Load().brokers.rendezvousAvoiding(layout.AnyKey(key), avoid)
}

func (s *brokerSet) rendezvousAvoiding(key uint64, avoid Avoid) (int32, bool) {
	if b, ok := s.rendezvous(key, avoid); ok {
		return b, true
	}
	if b, ok := s.rendezvous(key, AvoidOne(avoid.Last())); ok {
		return b, true
	}
	return s.rendezvous(key, Avoid{})
}
