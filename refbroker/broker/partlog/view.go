package partlog

import (
	"log/slog"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// TP names one partition.
type TP struct {
	Topic     string
	Partition int32
}

// Snapshot is the committed state of one partition as far as this broker
// knows it. It is immutable: a change publishes a new Snapshot.
type Snapshot struct {
	State schema.PartitionState
	// Rev is the state key's mod revision (0: no state committed yet).
	Rev int64
	// Segments sorted by base offset; shared with later snapshots, never
	// modified in place below its length.
	Segments []schema.Segment
}

// Find returns the index of the segment that holds offset, or -1.
func (s *Snapshot) Find(offset int64) int {
	i, _ := slices.BinarySearchFunc(s.Segments, offset, func(seg schema.Segment, off int64) int {
		switch {
		case seg.Last < off:
			return -1
		case seg.Base > off:
			return 1
		}
		return 0
	})
	if i < len(s.Segments) && s.Segments[i].Base <= offset && offset <= s.Segments[i].Last {
		return i
	}
	return -1
}

type entry struct {
	snap    *Snapshot // nil until some state or segment is known
	waiters map[chan struct{}]struct{}
	// floor is a committed end this broker learned at acquisition, at the
	// state revision floorRev, before the watch brought it to snap.
	floor, floorRev int64
}

// View is every partition's committed state and segment list, fed by a
// mirror.Sync of the log prefix (it is a mirror.Handler) and by the
// owner's own commits (Apply), whichever is newer by revision. Readers get
// immutable snapshots; waiters are woken by any change of a partition.
type View struct {
	schema schema.Schema
	log    *slog.Logger

	mu     sync.RWMutex
	parts  map[TP]*entry
	rev    int64
	synced chan struct{} // closed at the first Synced
}

// NewView returns an empty view. log may be nil.
func NewView(l layout.Layout, log *slog.Logger) *View {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &View{schema: schema.New(l), log: log, parts: make(map[TP]*entry), synced: make(chan struct{})}
}

// Ready is closed once the view holds a complete listing.
func (v *View) Ready() <-chan struct{} { return v.synced }

// RaiseFloor records that the partition's committed end was end at state
// revision rev, as an acquisition read it: until the watch brings that
// state, Floor reports it, so that a new owner whose view lags its
// predecessor's last commits does not report an older high watermark than
// the predecessor did.
func (v *View) RaiseFloor(tp TP, end, rev int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.entryLocked(tp)
	if (e.snap != nil && e.snap.Rev >= rev) || rev <= e.floorRev {
		return
	}
	e.floor, e.floorRev = end, rev
}

// Floor is the committed end RaiseFloor recorded and the snapshot does not
// hold yet (0 if none).
func (v *View) Floor(tp TP) int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if e := v.parts[tp]; e != nil {
		return e.floor
	}
	return 0
}

// Get returns the partition's snapshot.
func (v *View) Get(tp TP) (*Snapshot, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e := v.parts[tp]
	if e == nil || e.snap == nil {
		return nil, false
	}
	return e.snap, true
}

// Wait registers ch (capacity >= 1) to be signalled when any of tps changes.
// The returned func unregisters it.
func (v *View) Wait(tps []TP, ch chan struct{}) (cancel func()) {
	v.mu.Lock()
	for _, tp := range tps {
		e := v.entryLocked(tp)
		if e.waiters == nil {
			e.waiters = make(map[chan struct{}]struct{})
		}
		e.waiters[ch] = struct{}{}
	}
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, tp := range tps {
			if e := v.parts[tp]; e != nil {
				delete(e.waiters, ch)
				if e.snap == nil && len(e.waiters) == 0 && e.floorRev == 0 {
					delete(v.parts, tp)
				}
			}
		}
	}
}

func (v *View) entryLocked(tp TP) *entry {
	e := v.parts[tp]
	if e == nil {
		e = &entry{}
		v.parts[tp] = e
	}
	return e
}

// publishLocked installs s and wakes the partition's waiters.
func (v *View) publishLocked(e *entry, s *Snapshot) {
	e.snap = s
	if s == nil || s.Rev >= e.floorRev { // caught up, or the topic is gone
		e.floor, e.floorRev = 0, 0
	}
	for ch := range e.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Apply installs the result of a commit this broker made at rev, unless the
// view already holds a newer state. seg (optional) is the segment the commit
// added; drop lists segment bases the commit deleted.
func (v *View) Apply(tp TP, st schema.PartitionState, rev int64, seg *schema.Segment) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.entryLocked(tp)
	s := e.snap
	if s == nil {
		s = &Snapshot{}
	}
	if rev <= s.Rev {
		if seg != nil {
			v.addSegmentLocked(e, *seg)
		}
		return
	}
	n := &Snapshot{State: st, Rev: rev, Segments: trim(s.Segments, st.LogStart)}
	if seg != nil {
		n.Segments = insertSegment(n.Segments, *seg)
	}
	v.publishLocked(e, n)
}

func (v *View) addSegmentLocked(e *entry, seg schema.Segment) {
	s := e.snap
	if s == nil {
		s = &Snapshot{}
	}
	if seg.Last < s.State.LogStart {
		return // trimmed already; a late event must not bring it back
	}
	if i := s.Find(seg.Base); i >= 0 && s.Segments[i].Base == seg.Base {
		return
	}
	n := *s
	n.Segments = insertSegment(s.Segments, seg)
	v.publishLocked(e, &n)
}

// insertSegment returns segs with seg added in base order. Appending at the
// end shares the backing array (older snapshots never look past their
// length); anything else copies.
func insertSegment(segs []schema.Segment, seg schema.Segment) []schema.Segment {
	if len(segs) == 0 || segs[len(segs)-1].Base < seg.Base {
		return append(segs, seg)
	}
	i, found := slices.BinarySearchFunc(segs, seg.Base, func(s schema.Segment, b int64) int {
		switch {
		case s.Base < b:
			return -1
		case s.Base > b:
			return 1
		}
		return 0
	})
	out := make([]schema.Segment, 0, len(segs)+1)
	out = append(out, segs[:i]...)
	if found {
		out = append(out, seg)
		return append(out, segs[i+1:]...)
	}
	out = append(out, seg)
	return append(out, segs[i:]...)
}

// trim drops segments wholly below logStart.
func trim(segs []schema.Segment, logStart int64) []schema.Segment {
	i := 0
	for i < len(segs) && segs[i].Last < logStart {
		i++
	}
	return segs[i:]
}

// Reset implements mirror.Handler.
func (v *View) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	fresh := make(map[TP]*Snapshot)
	for _, kv := range kvs {
		k := v.schema.Parse(string(kv.Key))
		tp := TP{k.Topic, k.Partition}
		s := fresh[tp]
		if s == nil {
			s = &Snapshot{}
			fresh[tp] = s
		}
		switch k.Kind {
		case schema.KindPartitionState:
			if err := layout.Unmarshal(kv.Value, &s.State); err != nil {
				v.log.Warn("bad partition state in etcd", "key", string(kv.Key), "err", err)
				continue
			}
			s.Rev = kv.ModRevision
		case schema.KindSegment:
			var seg schema.Segment
			if err := layout.Unmarshal(kv.Value, &seg); err != nil {
				v.log.Warn("bad segment in etcd", "key", string(kv.Key), "err", err)
				continue
			}
			s.Segments = append(s.Segments, seg) // kvs are sorted by key = by base
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for tp, e := range v.parts {
		if _, ok := fresh[tp]; !ok && e.snap != nil && e.snap.Rev <= rev {
			e.snap = nil // gone at rev (deleted topic)
			if len(e.waiters) == 0 {
				delete(v.parts, tp)
			}
		}
	}
	for tp, s := range fresh {
		e := v.entryLocked(tp)
		s.Segments = trim(s.Segments, s.State.LogStart)
		if e.snap == nil || e.snap.Rev <= s.Rev {
			v.publishLocked(e, s)
			continue
		}
		for _, seg := range s.Segments { // ours is newer: keep it, learn segments
			v.addSegmentLocked(e, seg)
		}
	}
}

// Put implements mirror.Handler.
func (v *View) Put(kv *mvccpb.KeyValue) {
	k := v.schema.Parse(string(kv.Key))
	tp := TP{k.Topic, k.Partition}
	switch k.Kind {
	case schema.KindPartitionState:
		var st schema.PartitionState
		if err := layout.Unmarshal(kv.Value, &st); err != nil {
			v.log.Warn("bad partition state in etcd", "key", string(kv.Key), "err", err)
			return
		}
		v.Apply(tp, st, kv.ModRevision, nil)
	case schema.KindSegment:
		var seg schema.Segment
		if err := layout.Unmarshal(kv.Value, &seg); err != nil {
			v.log.Warn("bad segment in etcd", "key", string(kv.Key), "err", err)
			return
		}
		v.mu.Lock()
		v.addSegmentLocked(v.entryLocked(tp), seg)
		v.mu.Unlock()
	}
}

// Delete implements mirror.Handler.
func (v *View) Delete(kv *mvccpb.KeyValue) {
	k := v.schema.Parse(string(kv.Key))
	tp := TP{k.Topic, k.Partition}
	v.mu.Lock()
	defer v.mu.Unlock()
	e := v.parts[tp]
	if e == nil || e.snap == nil {
		return
	}
	switch k.Kind {
	case schema.KindPartitionState:
		if kv.ModRevision > e.snap.Rev {
			v.publishLocked(e, nil) // the topic was deleted
			if len(e.waiters) == 0 {
				delete(v.parts, tp)
			}
		}
	case schema.KindSegment:
		if i := e.snap.Find(k.Base); i >= 0 && e.snap.Segments[i].Base == k.Base {
			n := *e.snap
			n.Segments = slices.Delete(slices.Clone(e.snap.Segments), i, i+1)
			v.publishLocked(e, &n)
		}
	}
}

// Synced implements mirror.Handler.
func (v *View) Synced(rev int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.synced:
	default:
		close(v.synced)
	}
	v.rev = max(v.rev, rev)
}
