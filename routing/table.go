// Package routing is the proxy's routing table: which broker owns each
// partition and coordinates each group, which brokers are live, and what
// topics exist. It is best effort: it trails etcd by a watch round trip, and
// the broker's own ownership check is authoritative (a stale route costs one
// NOT_LEADER_OR_FOLLOWER and a retry, never a wrong write).
//
// Reads are lock-free and allocation-free: they load an immutable state
// through an atomic pointer and read per-partition cells with atomic loads,
// so a writer never blocks a reader. There is one writer (the watcher);
// writes to an existing partition or group are one atomic store, and only
// rare membership changes (a new topic, a broker joining) copy small maps.
package routing

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/kproxy/kproxy/layout"
)

// MaxPartitions bounds the partition cells a topic gets, so that a corrupt
// partition count cannot exhaust memory (it is the contract's bound,
// layout.MaxPartitions). Owner and epoch events for higher partitions are
// kept, but not routable.
const MaxPartitions = layout.MaxPartitions

// Broker is a live broker.
type Broker struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr"`
	Rack string `json:"rack,omitempty"`
}

// Topic is a topic's metadata. Configs is shared: callers must not modify it.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Configs    map[string]string
}

// Table is the routing table. The zero value is not usable: use NewTable.
type Table struct {
	st     atomic.Pointer[state]
	owners atomic.Int64 // owner keys held (Len)
	notify atomic.Pointer[notifier]
	mu     sync.Mutex // serializes writers; readers never take it
	// ownerOnly: see SetOwnerOnly; zoneReads: see SetZoneReads.
	ownerOnly, zoneReads, acquireInZone atomic.Bool
}

// state is immutable once published, except for the atomic cells that its
// topic entries and groups point to.
type state struct {
	brokers *brokerSet
	topics  map[string]*topicRef
	groups  *groupMap
}

// topicRef lets a topic's entry be replaced (new metadata, more partitions)
// without copying the topics map.
type topicRef struct {
	cur atomic.Pointer[topicEntry]
	// Writer-only fields, guarded by Table.mu.
	used     int              // cells and overflow entries that are not empty
	overflow map[int32]uint64 // partitions beyond len(cells): kept, not routable
}

// topicEntry is immutable except for the values in its cells.
type topicEntry struct {
	info  Topic
	known bool            // a topic key exists; otherwise only owners/epochs were seen
	cells []atomic.Uint64 // by partition
}

// notifier is the channel Changed hands out. handed avoids allocating a new
// channel on every write when nobody waits.
type notifier struct {
	ch     chan struct{}
	handed atomic.Bool
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{}
	t.st.Store(&state{brokers: newBrokerSet(nil), topics: map[string]*topicRef{}, groups: newGroupMap()})
	t.notify.Store(&notifier{ch: make(chan struct{})})
	return t
}

// An ownership value packs the broker that holds a partition (or
// coordinates a group) and the epoch of that holding, each bit-inverted so
// that the zero value means "no owner, unknown epoch" (-1, -1). A cell is the
// atomic.Uint64 that holds one partition's or group's ownership value.
func pack(owner, epoch int32) uint64 {
	return uint64(^uint32(owner))<<32 | uint64(^uint32(epoch))
}

func unpack(v uint64) (owner, epoch int32) {
	return int32(^uint32(v >> 32)), int32(^uint32(v))
}

func withOwner(v uint64, owner int32) uint64 {
	_, e := unpack(v)
	return pack(owner, e)
}

func withEpoch(v uint64, epoch int32) uint64 {
	o, _ := unpack(v)
	return pack(o, epoch)
}

func (st *state) ownership(topic string, p int32) uint64 {
	ref := st.topics[topic]
	if ref == nil || p < 0 {
		return 0
	}
	e := ref.cur.Load()
	if int64(p) >= int64(len(e.cells)) {
		return 0
	}
	return e.cells[p].Load()
}

// Topic returns a topic's metadata, if its topic key exists.
func (t *Table) Topic(name string) (Topic, bool) {
	ref := t.st.Load().topics[name]
	if ref == nil {
		return Topic{}, false
	}
	e := ref.cur.Load()
	return e.info, e.known
}

// Topics returns every known topic, sorted by name.
func (t *Table) Topics() []Topic {
	st := t.st.Load()
	out := make([]Topic, 0, len(st.topics))
	for _, ref := range st.topics {
		if e := ref.cur.Load(); e.known {
			out = append(out, e.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Owner returns the broker named by the partition's owner key (-1 if none)
// and its epoch (-1 if unknown). owned is true only if the owner key exists
// and that broker is live.
func (t *Table) Owner(topic string, p int32) (broker, epoch int32, owned bool) {
	st := t.st.Load()
	broker, epoch = unpack(st.ownership(topic, p))
	return broker, epoch, broker >= 0 && st.brokers.live(broker)
}

// Epoch returns the partition's leader epoch, -1 if unknown.
func (t *Table) Epoch(topic string, p int32) int32 {
	_, e := unpack(t.st.Load().ownership(topic, p))
	return e
}

// Route picks the broker for a partition request: the live owner unless it
// is avoid, else the rendezvous choice among live brokers other than avoid
// (every proxy replica picks the same one), else avoid itself if it is the
// only live broker (see RouteAvoiding). false means no broker is live.
func (t *Table) Route(topic string, p int32, avoid int32) (int32, bool) {
	return t.RouteAvoiding(topic, p, AvoidOne(avoid))
}

// Coordinator returns the broker named by the group's coordinator key (-1 if
// none); owned is true only if that broker is live.
func (t *Table) Coordinator(group string) (broker int32, owned bool) {
	st := t.st.Load()
	b, _ := unpack(st.groups.get(group))
	return b, b >= 0 && st.brokers.live(b)
}

// CoordinatorEpoch returns the group's coordinator epoch, -1 if unknown.
func (t *Table) CoordinatorEpoch(group string) int32 {
	_, e := unpack(t.st.Load().groups.get(group))
	return e
}

// RouteGroup is Route for a group's coordinator.
func (t *Table) RouteGroup(group string, avoid int32) (int32, bool) {
	return t.RouteGroupAvoiding(group, AvoidOne(avoid))
}

// AnyBroker picks a live broker other than avoid for a request that any
// broker can answer, by rendezvous on key so that equal keys go to the same
// broker.
func (t *Table) AnyBroker(key string, avoid int32) (int32, bool) {
	return t.AnyBrokerAvoiding(key, AvoidOne(avoid))
}

// Broker returns a live broker.
func (t *Table) Broker(id int32) (Broker, bool) {
	return t.st.Load().brokers.get(id)
}

// Brokers returns the live brokers sorted by id. The slice is shared (it is
// read on every Metadata request): do not modify its elements. Its capacity
// equals its length, so append copies.
func (t *Table) Brokers() []Broker {
	s := t.st.Load().brokers.sorted
	return s[:len(s):len(s)]
}

// Len is the number of owner keys the table holds.
func (t *Table) Len() int { return int(t.owners.Load()) }

// Changed returns a channel closed at the next change to the table. Take it
// before checking a condition, then wait on it if the condition is not met.
func (t *Table) Changed() <-chan struct{} {
	n := t.notify.Load()
	n.handed.Store(true)
	return n.ch
}

// changed wakes waiters; writers call it after each change with mu held.
func (t *Table) changed() {
	n := t.notify.Load()
	if n.handed.Load() {
		t.notify.Store(&notifier{ch: make(chan struct{})})
		close(n.ch)
	}
}
