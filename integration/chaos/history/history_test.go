package history

import (
	"bytes"
	"reflect"
	"sync"
	"testing"
	"time"
)

func tickClock() func() time.Time {
	var mu sync.Mutex
	t := time.Unix(100, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func TestRecorderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, tickClock())
	inv := r.Invoke(Op{Process: "producer-1", F: Send, Value: "v1", Partition: 3, Idempotent: true, Seq: 7, Via: "127.0.0.1:9092"})
	ok := r.Complete(inv, Op{Type: OK, Partition: 3, Offset: 41})
	pinv := r.Invoke(Op{Process: "consumer-0", F: Poll})
	r.Complete(pinv, Op{Type: OK, Records: []Record{{3, 41, "v1"}}, Watermarks: []Watermark{{3, 42}}})
	finv := r.Invoke(Op{Process: "nemesis", F: Fault, Fault: "kill-broker", Target: "broker-2"})
	fdone := r.Complete(finv, Op{Type: OK})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}

	if inv.Index != 0 || ok.Index != 1 || ok.Invoke != 0 || ok.Time <= inv.Time {
		t.Fatalf("indices/times wrong: inv %+v ok %+v", inv, ok)
	}
	if ok.Process != "producer-1" || ok.F != Send || ok.Value != "v1" || !ok.Idempotent || ok.Seq != 7 || ok.Via != inv.Via {
		t.Fatalf("outcome did not inherit the invocation's fields: %+v", ok)
	}
	if fdone.Fault != "kill-broker" || fdone.Target != "broker-2" {
		t.Fatalf("fault outcome = %+v", fdone)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r.Ops()) {
		t.Fatalf("read back %+v\nwant %+v", got, r.Ops())
	}
}

func TestCompleteDefaults(t *testing.T) {
	r := NewRecorder(nil, tickClock())
	inv := r.Invoke(Op{Process: "p", F: Send, Value: "v", Partition: 5})
	out := r.Complete(inv, Op{})
	if out.Type != Info || out.Partition != 5 {
		t.Fatalf("empty outcome should be info on the invoked partition: %+v", out)
	}
	failed := r.Complete(r.Invoke(Op{Process: "p", F: Send, Value: "w", Partition: 2}), Op{Type: Fail, Partition: 9})
	if failed.Partition != 2 {
		t.Fatalf("a failed send keeps the invoked partition: %+v", failed)
	}
}

func TestPairs(t *testing.T) {
	ops := []Op{
		{Index: 0, Type: Invoke, F: Send, Value: "a"},
		{Index: 1, Type: Invoke, F: Send, Value: "b"},
		{Index: 2, Type: OK, F: Send, Invoke: 1},
		{Index: 3, Type: Fail, F: Send, Invoke: 1},  // second outcome: orphan
		{Index: 4, Type: Info, F: Send, Invoke: 99}, // no invocation: orphan
	}
	pairs, orphans := Pairs(ops)
	if len(pairs) != 2 || len(orphans) != 2 {
		t.Fatalf("pairs %d orphans %d", len(pairs), len(orphans))
	}
	if pairs[0].Complete != nil || pairs[0].Outcome() != Info {
		t.Fatalf("a has no outcome and must read as info: %+v", pairs[0])
	}
	if pairs[1].Outcome() != OK || pairs[1].Complete.Index != 2 {
		t.Fatalf("b = %+v", pairs[1])
	}
	if orphans[0].Index != 3 || orphans[1].Index != 4 {
		t.Fatalf("orphans = %+v", orphans)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				inv := r.Invoke(Op{Process: "p", F: Send, Seq: int64(g*1000 + i)})
				r.Complete(inv, Op{Type: OK})
			}
		}()
	}
	wg.Wait()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	ops, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1600 {
		t.Fatalf("read %d ops, want 1600", len(ops))
	}
	for i, op := range ops {
		if op.Index != int64(i) {
			t.Fatalf("op %d has index %d: lines out of order", i, op.Index)
		}
		if i > 0 && op.Time < ops[i-1].Time {
			t.Fatalf("op %d time goes back", i)
		}
	}
	pairs, orphans := Pairs(ops)
	if len(pairs) != 800 || len(orphans) != 0 {
		t.Fatalf("pairs %d orphans %d", len(pairs), len(orphans))
	}
}
