package apis

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/apis/split"
	"github.com/kproxy/kproxy/routing"
)

// topicIDs maps topic IDs (Produce v13+, Fetch v13+) to names. The routing
// table is keyed by name, so the index is rebuilt from it, but only when a
// lookup misses or finds a stale entry after a routing change: ownership
// changes, which are frequent, leave the index alone.
type topicIDs struct {
	cur atomic.Pointer[idIndex]
	mu  sync.Mutex // serializes rebuilds
}

type idIndex struct {
	changed <-chan struct{}
	byID    map[[16]byte]string
}

func (x *topicIDs) name(routes *routing.Table, id [16]byte) (string, bool) {
	ix := x.cur.Load()
	if ix != nil {
		name, ok := ix.byID[id]
		if !closed(ix.changed) {
			return name, ok
		}
		// The table changed since the index was built; the entry is still
		// right if routing agrees.
		if ok {
			if t, known := routes.Topic(name); known && t.ID == id {
				return name, true
			}
		}
	}
	ix = x.rebuild(routes, ix)
	name, ok := ix.byID[id]
	return name, ok
}

func (x *topicIDs) rebuild(routes *routing.Table, seen *idIndex) *idIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ix := x.cur.Load(); ix != seen && ix != nil && !closed(ix.changed) {
		return ix // another caller rebuilt meanwhile
	}
	ix := &idIndex{changed: routes.Changed()}
	topics := routes.Topics()
	ix.byID = make(map[[16]byte]string, len(topics))
	for _, t := range topics {
		if t.ID != ([16]byte{}) {
			ix.byID[t.ID] = t.Name
		}
	}
	x.cur.Store(ix)
	return ix
}

// addPartition resolves one partition of a client request (by topic id
// when byID) and adds it to s: answered locally when chk denies the topic
// (before its existence is told, as Kafka does) or with the unknown-topic
// code when it does not exist, routed otherwise.
func (d *Dispatcher) addPartition(s *split.Engine, chk *authrule.TopicCheck, name string, id [16]byte, byID bool, part, ti, pi int32) {
	n, rid, code := d.partRoute(chk, name, id, byID, part)
	if code != 0 {
		s.AddLocal(n, id, part, ti, pi, code)
		return
	}
	s.Add(n, rid, part, ti, pi)
}

// partRoute resolves a partition of a request: the topic's name and the id
// to route it by, or the code the proxy answers it with itself (unknown or
// denied; the name is then the one the request gave when its id is unknown).
func (d *Dispatcher) partRoute(chk *authrule.TopicCheck, name string, id [16]byte, byID bool, part int32) (string, [16]byte, int16) {
	unknown := kerr.UnknownTopicOrPartition.Code
	if byID {
		unknown = kerr.UnknownTopicID.Code
		n, ok := d.ids.name(d.routes, id)
		if !ok {
			return name, id, unknown
		}
		name = n
	}
	if code := chk.Denied(name); code != 0 {
		return name, id, code
	}
	t, ok := d.routes.Topic(name)
	if !ok || part < 0 || part >= t.Partitions {
		if ok {
			unknown = kerr.UnknownTopicOrPartition.Code
		}
		return name, id, unknown
	}
	return name, t.ID, 0
}
