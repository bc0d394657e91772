package partlog

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

func testBatch(pid int64, epoch int16, seq int32, ts int64, values ...string) []byte {
	return kwiretest.Batch{ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		FirstTimestamp: ts, SpreadTimestamps: true, Values: kwiretest.Values(values...)}.Encode()
}

func TestParseProduce(t *testing.T) {
	good := testBatch(-1, -1, -1, 1, "a", "b")
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 1
		return c
	}
	cases := []struct {
		name    string
		records []byte
		want    int16
		batches int
	}{
		{"one", good, 0, 1},
		{"two", append(append([]byte(nil), good...), good...), 0, 2},
		{"empty", nil, kerr.InvalidRecord.Code, 0},
		{"payload bit flipped", flip(good, len(good)-1), kerr.CorruptMessage.Code, 0},
		{"attributes bit flipped", flip(good, kwire.BatchOffAttributes+1), kerr.CorruptMessage.Code, 0},
		{"base offset may be anything", flip(good, 3), 0, 1},
		{"magic 1", flip(good, kwire.BatchOffMagic), kerr.UnsupportedForMessageFormat.Code, 0},
		{"length past end", flip(good, kwire.BatchOffLength+3), kerr.CorruptMessage.Code, 0},
		{"trailing garbage", append(append([]byte(nil), good...), 0, 0), kerr.CorruptMessage.Code, 0},
	}
	for _, tc := range cases {
		bs, err := ParseProduce(tc.records)
		code := int16(0)
		if err != nil {
			code = err.Code
		}
		if code != tc.want || len(bs) != tc.batches {
			t.Errorf("%s: code %d batches %d, want %d and %d", tc.name, code, len(bs), tc.want, tc.batches)
		}
	}
}

func TestCheckSequence(t *testing.T) {
	known := schema.ProducerState{Epoch: 3, Batches: []schema.ProducerBatch{
		{FirstSeq: 0, LastSeq: 4, BaseOffset: 10}, {FirstSeq: 5, LastSeq: 9, BaseOffset: 20},
	}}
	wrap := schema.ProducerState{Epoch: 0, Batches: []schema.ProducerBatch{{FirstSeq: 1<<31 - 2, LastSeq: 1<<31 - 1}}}
	cases := []struct {
		name        string
		ps          schema.ProducerState
		known       bool
		epoch       int16
		first, last int32
		dup         int64
		code        int16
	}{
		{"unknown producer, any sequence", schema.ProducerState{}, false, 0, 77, 80, -1, 0},
		{"next", known, true, 3, 10, 12, -1, 0},
		{"duplicate of last", known, true, 3, 5, 9, 20, 0},
		{"duplicate of older", known, true, 3, 0, 4, 10, 0},
		{"gap", known, true, 3, 11, 12, -1, kerr.OutOfOrderSequenceNumber.Code},
		{"overlap", known, true, 3, 7, 12, -1, kerr.OutOfOrderSequenceNumber.Code},
		{"older epoch", known, true, 2, 10, 12, -1, kerr.InvalidProducerEpoch.Code},
		{"newer epoch from 0", known, true, 4, 0, 3, -1, 0},
		{"newer epoch not from 0", known, true, 4, 10, 12, -1, kerr.OutOfOrderSequenceNumber.Code},
		{"wraps to 0", wrap, true, 0, 0, 3, -1, 0},
	}
	for _, tc := range cases {
		b := &Batch{ProducerID: 1, ProducerEpoch: tc.epoch, BaseSequence: tc.first, LastOffsetDelta: tc.last - tc.first}
		dup, code, _ := checkSequence(tc.ps, tc.known, b)
		if dup != tc.dup || code != tc.code {
			t.Errorf("%s: dup %d code %d, want %d and %d", tc.name, dup, code, tc.dup, tc.code)
		}
	}
}

func TestMultiBatchRequestSequencesInOrder(t *testing.T) {
	tab := producerTable{}
	bs, berr := ParseProduce(append(testBatch(7, 0, 0, 1, "a", "b"), testBatch(7, 0, 2, 1, "c")...))
	if berr != nil {
		t.Fatal(berr)
	}
	if res, ok := tab.check(bs); !ok || res.Code != 0 {
		t.Fatalf("two consecutive batches of one producer: %+v", res)
	}
	bs, _ = ParseProduce(append(testBatch(7, 0, 0, 1, "a"), testBatch(7, 0, 0, 1, "a")...))
	if res, ok := tab.check(bs); ok || res.Code != kerr.DuplicateSequenceNumber.Code {
		t.Fatalf("the same batch twice in one request: %+v %v", res, ok)
	}
}

func kv(key string, value any, modRev int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(layout.Marshal(value)), ModRevision: modRev}
}

func TestViewIsMonotone(t *testing.T) {
	l := layout.New("/v")
	k := schema.New(l)
	v := NewView(l, nil)
	tp := TP{"t", 0}
	seg := func(base, last int64) schema.Segment { return schema.Segment{Object: "o", Base: base, Last: last} }
	v.Reset(nil, 1)
	v.Synced(1)
	v.Apply(tp, schema.PartitionState{End: 10}, 20, &schema.Segment{Object: "o", Base: 5, Last: 9})
	// A late watch event of an older state must not move the end back.
	v.Put(kv(k.PartitionStateKey("t", 0), schema.PartitionState{End: 5}, 15))
	// The predecessor's segment, learned late, is still added.
	v.Put(kv(k.SegmentKey("t", 0, 0), seg(0, 4), 12))
	s, _ := v.Get(tp)
	if s.State.End != 10 || s.Rev != 20 || len(s.Segments) != 2 || s.Find(3) != 0 || s.Find(7) != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	// Trimming drops segments below the start; a stale put cannot restore one.
	v.Apply(tp, schema.PartitionState{LogStart: 5, End: 10}, 30, nil)
	v.Put(kv(k.SegmentKey("t", 0, 0), seg(0, 4), 12))
	if s, _ = v.Get(tp); len(s.Segments) != 1 || s.Find(3) != -1 {
		t.Fatalf("after trim: %+v", s)
	}
	// A re-list at an older revision keeps the newer state.
	v.Reset([]*mvccpb.KeyValue{kv(k.PartitionStateKey("t", 0), schema.PartitionState{End: 10}, 20)}, 25)
	if s, _ = v.Get(tp); s.Rev != 30 || s.State.LogStart != 5 {
		t.Fatalf("after older reset: %+v", s)
	}
	// Deleting the state (topic deleted) removes the partition.
	v.Delete(&mvccpb.KeyValue{Key: []byte(k.PartitionStateKey("t", 0)), ModRevision: 40})
	if _, ok := v.Get(tp); ok {
		t.Fatal("partition still visible after its state was deleted")
	}
}

func TestViewWakesWaiters(t *testing.T) {
	v := NewView(layout.New("/v"), nil)
	tp := TP{"t", 0}
	ch := make(chan struct{}, 1)
	cancel := v.Wait([]TP{tp}, ch)
	defer cancel()
	v.Apply(tp, schema.PartitionState{End: 1}, 5, nil)
	select {
	case <-ch:
	default:
		t.Fatal("waiter not woken by a commit")
	}
}

type memObjects map[string][]byte

func (m memObjects) PutIfAbsent(_ context.Context, k string, d []byte) error { m[k] = d; return nil }
func (m memObjects) Get(_ context.Context, k string) ([]byte, error)         { return m[k], nil }

func TestReadLimits(t *testing.T) {
	objs := memObjects{}
	var segs []schema.Segment
	var data []byte
	for i := range 3 { // segment 0: offsets 0-3 (two batches), segment 1: 4-5
		b := testBatch(-1, -1, -1, int64(100*i), "x", "y")
		setBaseOffset(b, int64(2*i))
		data = append(data, b...)
	}
	objs["s0"] = data[:len(data)/3*2]
	objs["s1"] = data[len(data)/3*2:]
	one := len(data) / 3
	segs = append(segs, schema.Segment{Object: "s0", Base: 0, Last: 3, MaxTimestamp: 101},
		schema.Segment{Object: "s1", Base: 4, Last: 5, MaxTimestamp: 201})
	snap := &Snapshot{State: schema.PartitionState{End: 6}, Segments: segs}
	ctx := context.Background()
	cases := []struct {
		name       string
		offset     int64
		max        int
		atLeastOne bool
		want       int
	}{
		{"everything", 0, 1 << 20, true, 3 * one},
		{"from the middle of a batch", 1, 1 << 20, true, 3 * one},
		{"second segment", 5, 1 << 20, true, one},
		{"limit", 0, 2*one + 1, true, 2 * one},
		{"first batch beyond the limit", 0, 1, true, one},
		{"nothing when not first", 0, 1, false, 0},
		{"at end", 6, 1 << 20, true, 0},
	}
	for _, tc := range cases {
		got, err := Read(ctx, objs, snap, tc.offset, tc.max, tc.atLeastOne)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: %d bytes (%v), want %d", tc.name, len(got), err, tc.want)
		}
	}
	ts, ok, err := ByTimestamp(ctx, objs, snap, 101)
	if err != nil || !ok || ts.Offset != 3 || ts.Timestamp != 101 {
		t.Errorf("by timestamp 101: %+v %v %v, want offset 3", ts, ok, err)
	}
	if _, ok, _ := ByTimestamp(ctx, objs, snap, 1000); ok {
		t.Error("by timestamp past the last record found something")
	}
}

func TestViewReset(t *testing.T) {
	l := layout.New("/v")
	k := schema.New(l)
	v := NewView(l, nil)
	a, b := TP{"a", 0}, TP{"b", 1}
	seg := func(base, last int64) schema.Segment { return schema.Segment{Object: "o", Base: base, Last: last} }
	v.Apply(b, schema.PartitionState{End: 3}, 50, &schema.Segment{Object: "o", Base: 0, Last: 2})
	gone := TP{"gone", 0}
	v.Apply(gone, schema.PartitionState{End: 1}, 5, nil)
	v.Reset([]*mvccpb.KeyValue{
		kv(k.PartitionStateKey("a", 0), schema.PartitionState{LogStart: 2, End: 6}, 10),
		kv(k.SegmentKey("a", 0, 0), seg(0, 1), 8),
		kv(k.SegmentKey("a", 0, 2), seg(2, 3), 9),
		kv(k.SegmentKey("a", 0, 4), seg(4, 5), 10),
		kv(k.PartitionStateKey("b", 1), schema.PartitionState{End: 2}, 40),
		kv(k.SegmentKey("b", 1, 3), seg(3, 4), 45),
	}, 45)
	v.Synced(45)
	select {
	case <-v.Ready():
	default:
		t.Fatal("not ready after Synced")
	}
	s, ok := v.Get(a)
	if !ok || s.State.End != 6 || len(s.Segments) != 2 || s.Segments[0].Base != 2 {
		t.Fatalf("a: %+v (segments below the log start must be dropped)", s)
	}
	s, ok = v.Get(b)
	if !ok || s.Rev != 50 || s.State.End != 3 || len(s.Segments) != 2 {
		t.Fatalf("b: %+v (newer local state kept, listed segments learned)", s)
	}
	if _, ok := v.Get(gone); ok {
		t.Fatal("a partition absent from a newer listing is still visible")
	}
	// Segments arriving out of order are kept sorted.
	v.Put(kv(k.SegmentKey("b", 1, 8), seg(8, 9), 60))
	v.Put(kv(k.SegmentKey("b", 1, 5), seg(5, 7), 61))
	s, _ = v.Get(b)
	for i := 1; i < len(s.Segments); i++ {
		if s.Segments[i-1].Base >= s.Segments[i].Base {
			t.Fatalf("segments out of order: %+v", s.Segments)
		}
	}
	v.Delete(&mvccpb.KeyValue{Key: []byte(k.SegmentKey("b", 1, 5)), ModRevision: 62})
	if s, _ = v.Get(b); s.Find(6) != -1 || len(s.Segments) != 3 {
		t.Fatalf("after segment delete: %+v", s.Segments)
	}
}

// TestViewFloor: the committed end an acquisition read is reported until
// the view holds that state, and forgotten once it does or the partition is
// deleted; a floor older than the view is ignored.
func TestViewFloor(t *testing.T) {
	l := layout.New("/v")
	k := schema.New(l)
	v := NewView(l, nil)
	tp := TP{"t", 0}
	v.Reset(nil, 1)
	v.Synced(1)
	v.Put(kv(k.PartitionStateKey("t", 0), schema.PartitionState{End: 5}, 10))

	v.RaiseFloor(tp, 4, 8) // older than the view: nothing to add
	if f := v.Floor(tp); f != 0 {
		t.Fatalf("floor %d from an acquisition older than the view", f)
	}
	v.RaiseFloor(tp, 7, 12) // the view lags the predecessor's last commit
	if f := v.Floor(tp); f != 7 {
		t.Fatalf("floor %d, want 7", f)
	}
	v.Put(kv(k.PartitionStateKey("t", 0), schema.PartitionState{End: 6}, 11)) // still behind
	if f := v.Floor(tp); f != 7 {
		t.Fatalf("floor %d after an older state, want 7", f)
	}
	v.Put(kv(k.PartitionStateKey("t", 0), schema.PartitionState{End: 7}, 12)) // caught up
	if f := v.Floor(tp); f != 0 {
		t.Fatalf("floor %d after the view caught up, want none", f)
	}
	v.RaiseFloor(tp, 9, 20)
	v.Delete(&mvccpb.KeyValue{Key: []byte(k.PartitionStateKey("t", 0)), ModRevision: 30})
	if f := v.Floor(tp); f != 0 {
		t.Fatalf("floor %d survived the partition's deletion", f)
	}
}
