package adminui

import (
	"cmp"
	"slices"
	"time"

	"github.com/kproxy/kproxy/routing"
)

// forgetBroker is how long a broker that left the table stays listed as
// not live, so that an operator sees which broker went away.
const forgetBroker = time.Hour

// Change is one observed ownership change of a partition.
type Change struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	From      int32     `json:"from"` // -1: no owner
	To        int32     `json:"to"`   // -1: no owner
	Epoch     int32     `json:"epoch"`
	At        time.Time `json:"at"`
}

// BrokerRow is a broker the page lists: live ones from the table, and ones
// that left it within the last hour.
type BrokerRow struct {
	ID         int32     `json:"id"`
	Addr       string    `json:"addr"`
	Rack       string    `json:"rack,omitempty"`
	Live       bool      `json:"live"`
	LastSeen   time.Time `json:"last_seen"`
	Partitions int       `json:"partitions"` // partitions it owns
	Groups     int       `json:"groups"`     // groups it coordinates
}

// TopicRow is a topic with its partition count and how many partitions
// have a live owner.
type TopicRow struct {
	Name       string `json:"name"`
	Partitions int32  `json:"partitions"`
	Owned      int    `json:"owned"` // partitions whose owner is live
}

// PartitionRow is one partition with its owner and since when the proxy
// has seen that owner.
type PartitionRow struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Owner     int32     `json:"owner"` // -1: none
	Epoch     int32     `json:"epoch"` // -1: unknown
	Live      bool      `json:"live"`
	Since     time.Time `json:"since"`
	// SinceKnown is false when the owner already held the partition when
	// the proxy started watching: Since is then a lower bound.
	SinceKnown bool `json:"since_known"`
}

// view is one immutable state of the page's data; handlers read the newest
// through an atomic pointer.
type view struct {
	version uint64
	at      time.Time
	brokers []BrokerRow
	topics  []TopicRow
	parts   []PartitionRow
	groups  []routing.SnapshotGroup
	recent  []Change // newest first
}

type partState struct {
	owner, epoch int32
	since        time.Time
	known        bool
}

// tracker folds successive snapshots into views, remembering when each
// partition's owner was first seen. Only the UI's Run goroutine uses it.
type tracker struct {
	now     func() time.Time
	keep    int // recent changes kept
	started bool
	version uint64
	parts   map[string][]partState
	brokers map[int32]BrokerRow
	recent  []Change
}

func newTracker(now func() time.Time, keep int) *tracker {
	return &tracker{now: now, keep: keep, parts: map[string][]partState{}, brokers: map[int32]BrokerRow{}}
}

// observe folds s in and returns the new view and the ownership changes
// since the previous snapshot (none for the first one: what the proxy found
// when it started is not a change).
func (t *tracker) observe(s routing.Snapshot) (*view, []Change) {
	now := t.now()
	t.version++
	v := &view{version: t.version, at: now, groups: s.Groups, parts: make([]PartitionRow, 0, len(s.Partitions))}
	next := make(map[string][]partState, len(s.Topics))
	var changes []Change
	var prev, cur []partState
	curTopic := ""
	flush := func() {
		if curTopic != "" {
			next[curTopic] = cur
		}
	}
	for _, p := range s.Partitions {
		if p.Topic != curTopic {
			flush()
			curTopic, prev, cur = p.Topic, t.parts[p.Topic], make([]partState, 0, 8)
		}
		ps := partState{owner: p.Owner, epoch: p.Epoch, since: now, known: t.started}
		from, seen := int32(-1), false
		if int(p.Partition) < len(prev) {
			from, seen = prev[p.Partition].owner, true
		}
		if seen && from == p.Owner {
			ps.since, ps.known = prev[p.Partition].since, prev[p.Partition].known
		} else if t.started && (seen || p.Owner >= 0) {
			changes = append(changes, Change{Topic: p.Topic, Partition: p.Partition, From: from, To: p.Owner, Epoch: p.Epoch, At: now})
		}
		cur = append(cur, ps)
		v.parts = append(v.parts, PartitionRow{Topic: p.Topic, Partition: p.Partition, Owner: p.Owner, Epoch: p.Epoch,
			Live: p.Live, Since: ps.since, SinceKnown: ps.known})
	}
	flush()
	t.parts, t.started = next, true
	v.brokers = t.brokerRows(s, v.parts, now)
	v.topics = topicRows(s.Topics, v.parts)
	t.remember(changes)
	v.recent = t.recent
	return v, changes
}

// remember keeps the newest keep changes, newest first. t.recent is never
// modified in place: views share it.
func (t *tracker) remember(changes []Change) {
	if len(changes) == 0 {
		return
	}
	n := min(len(changes), t.keep)
	out := make([]Change, 0, t.keep)
	for i := len(changes) - 1; i >= len(changes)-n; i-- {
		out = append(out, changes[i])
	}
	out = append(out, t.recent[:min(len(t.recent), t.keep-n)]...)
	t.recent = out
}

func (t *tracker) brokerRows(s routing.Snapshot, parts []PartitionRow, now time.Time) []BrokerRow {
	live := make(map[int32]bool, len(s.Brokers))
	for _, b := range s.Brokers {
		live[b.ID] = true
		t.brokers[b.ID] = BrokerRow{ID: b.ID, Addr: b.Addr, Rack: b.Rack, Live: true, LastSeen: now}
	}
	for id, b := range t.brokers {
		switch {
		case live[id]:
		case now.Sub(b.LastSeen) > forgetBroker:
			delete(t.brokers, id)
		default:
			b.Live = false
			t.brokers[id] = b
		}
	}
	owned := map[int32]int{}
	for _, p := range parts {
		owned[p.Owner]++
	}
	coord := map[int32]int{}
	for _, g := range s.Groups {
		coord[g.Coordinator]++
	}
	rows := make([]BrokerRow, 0, len(t.brokers))
	for _, b := range t.brokers {
		b.Partitions, b.Groups = owned[b.ID], coord[b.ID]
		rows = append(rows, b)
	}
	slices.SortFunc(rows, func(a, b BrokerRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

func topicRows(topics []routing.SnapshotTopic, parts []PartitionRow) []TopicRow {
	owned := make(map[string]int, len(topics))
	for _, p := range parts {
		if p.Live {
			owned[p.Topic]++
		}
	}
	rows := make([]TopicRow, len(topics))
	for i, tp := range topics {
		rows[i] = TopicRow{Name: tp.Name, Partitions: tp.Partitions, Owned: owned[tp.Name]}
	}
	return rows
}
