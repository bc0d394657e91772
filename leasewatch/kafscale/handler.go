package kafscale

import (
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"golang.org/x/time/rate"

	"github.com/kproxy/kproxy/routing"
)

// sink is what lease keys are applied to: the live table for watch
// events, a Builder for a full listing.
type sink interface {
	SetOwnerAndEpoch(topic string, p, broker, epoch int32)
	SetCoordinatorAndEpoch(group string, broker, epoch int32)
}

var _ sink = (*routing.Table)(nil)
var _ sink = (*routing.Builder)(nil)

// handler applies mirror.Sync's calls. Sync calls it from one
// goroutine, so its state needs no lock; only the missing list is read
// elsewhere (through Source.h).
type handler struct {
	s     *Source
	snap  snapshot         // the snapshot in the table (the last good one)
	named map[string]int32 // lease key -> the broker its value names
	refs  map[int32]int    // broker -> lease keys naming it
	warn  *rate.Sometimes
}

func newHandler(s *Source) *handler {
	return &handler{
		s: s, snap: emptySnapshot(), named: map[string]int32{}, refs: map[int32]int{},
		warn: &rate.Sometimes{Interval: s.cfg.MissingLogInterval},
	}
}

// Reset rebuilds the table from a full listing, in one atomic step.
func (h *handler) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	b := routing.NewBuilder()
	clear(h.named)
	clear(h.refs)
	listed := false
	for _, kv := range kvs {
		k, ok := h.parse(kv)
		if !ok {
			continue
		}
		if k.kind == kindSnapshot {
			// A malformed snapshot keeps the last good one.
			listed = true
			if next, ok := h.decodeSnapshot(kv); ok {
				h.snap = next
			}
			continue
		}
		h.putLease(b, k, kv)
	}
	if !listed {
		h.snap = emptySnapshot()
	}
	for _, br := range h.snap.brokers {
		b.SetBroker(br)
	}
	for _, tp := range h.snap.topics {
		b.SetTopic(tp)
	}
	t := h.s.cfg.Table
	t.Replace(b)
	h.updateMissing()
	h.s.cfg.Logger.Info("routing table loaded from KafScale keys", "revision", rev, "keys", len(kvs),
		"owners", t.Len(), "brokers", len(t.Brokers()), "topics", len(h.snap.topics))
}

// Put applies a created or updated key.
func (h *handler) Put(kv *mvccpb.KeyValue) {
	k, ok := h.received(kv)
	if !ok {
		return
	}
	switch k.kind {
	case kindSnapshot:
		if next, ok := h.decodeSnapshot(kv); ok {
			h.applySnapshot(next)
		}
	case kindPartition, kindGroup:
		h.putLease(h.s.cfg.Table, k, kv)
	default:
		return
	}
	h.updateMissing()
}

// Delete applies a deleted key: a lease that was revoked or ran out.
func (h *handler) Delete(kv *mvccpb.KeyValue) {
	k, ok := h.received(kv)
	if !ok {
		return
	}
	t := h.s.cfg.Table
	switch k.kind {
	case kindPartition:
		// The epoch stays: the next owner's key has a higher revision.
		t.DeleteOwner(k.topic, k.part)
	case kindGroup:
		t.DeleteCoordinator(k.group)
	case kindSnapshot:
		h.s.cfg.Logger.Warn("KafScale metadata snapshot deleted: no broker or topic is known", "key", string(kv.Key))
		h.applySnapshot(emptySnapshot())
	default:
		return
	}
	h.forget(string(kv.Key))
	h.updateMissing()
}

// Synced records that the table is complete up to rev.
func (h *handler) Synced(rev int64) { h.s.h.Synced(rev) }

// received counts a watch event by kind, the dropped ones too (a key
// routing does not use, or cannot parse), then parses it.
func (h *handler) received(kv *mvccpb.KeyValue) (key, bool) {
	k, ok := h.parse(kv)
	h.s.h.Events.WithLabelValues(k.kind.String()).Inc()
	return k, ok
}

// parse names a key; a key that cannot be parsed is logged, counted and
// skipped (ok false, the kind kept for the count), like any key routing
// does not use.
func (h *handler) parse(kv *mvccpb.KeyValue) (key, bool) {
	k, err := h.s.keys.parse(string(kv.Key))
	if err != nil {
		h.bad(kv, k.kind, err)
		return k, false
	}
	return k, k.kind != kindOther
}

func (h *handler) bad(kv *mvccpb.KeyValue, kind keyKind, err error) {
	h.s.cfg.Logger.Warn("skipping bad KafScale etcd value", "key", string(kv.Key), "revision", kv.ModRevision, "err", err)
	h.s.h.Bad.WithLabelValues(kind.String()).Inc()
}

func (h *handler) decodeSnapshot(kv *mvccpb.KeyValue) (snapshot, bool) {
	next, skipped, err := decodeSnapshot(kv.Value)
	if err != nil {
		h.bad(kv, kindSnapshot, err)
		return snapshot{}, false
	}
	for _, e := range skipped {
		h.bad(kv, kindSnapshot, e)
	}
	return next, true
}

// putLease applies an owner or coordinator key to dst.
func (h *handler) putLease(dst sink, k key, kv *mvccpb.KeyValue) {
	owner, err := parseOwner(kv.Value)
	if err != nil {
		h.bad(kv, k.kind, err)
		return
	}
	epoch := epochOf(kv.ModRevision)
	// Owner and epoch in one store: a reader never sees the new owner
	// with the previous owner's epoch.
	if k.kind == kindPartition {
		dst.SetOwnerAndEpoch(k.topic, k.part, owner, epoch)
	} else {
		dst.SetCoordinatorAndEpoch(k.group, owner, epoch)
	}
	h.forget(string(kv.Key))
	h.named[string(kv.Key)] = owner
	h.refs[owner]++
}

// forget drops what a lease key named.
func (h *handler) forget(key string) {
	old, ok := h.named[key]
	if !ok {
		return
	}
	delete(h.named, key)
	if h.refs[old]--; h.refs[old] <= 0 {
		delete(h.refs, old)
	}
}

// applySnapshot changes the live table from h.snap to next.
func (h *handler) applySnapshot(next snapshot) {
	t := h.s.cfg.Table
	for _, br := range next.brokers {
		t.SetBroker(br) // a no-op when unchanged
	}
	for id := range h.snap.brokers {
		if _, ok := next.brokers[id]; !ok {
			t.DeleteBroker(id)
		}
	}
	for name, tp := range next.topics {
		if old, ok := h.snap.topics[name]; !ok || old.ID != tp.ID || old.Partitions != tp.Partitions {
			t.SetTopic(tp)
		}
	}
	for name := range h.snap.topics {
		if _, ok := next.topics[name]; !ok {
			t.DeleteTopic(name)
		}
	}
	h.snap = next
}

// updateMissing recomputes the owners missing from the snapshot and warns
// (rate-limited) while there are any.
func (h *handler) updateMissing() {
	var missing []int32
	for id := range h.refs {
		if _, ok := h.snap.brokers[id]; !ok {
			missing = append(missing, id)
		}
	}
	slices.Sort(missing)
	if !h.s.h.SetMissing(missing) {
		return
	}
	if len(missing) == 0 {
		h.s.cfg.Logger.Info("every lease owner is in the KafScale metadata snapshot again")
		return
	}
	h.warn.Do(func() {
		h.s.cfg.Logger.Warn("lease owners missing from the KafScale metadata snapshot: their partitions and groups get retriable errors until it lists them",
			"brokers", missing, "snapshot_brokers", slices.Sorted(maps.Keys(h.snap.brokers)))
	})
}
