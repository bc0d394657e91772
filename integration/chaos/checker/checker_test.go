package checker

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// builder writes synthetic histories on a clock that advances 1ms per op.
type builder struct {
	r   *history.Recorder
	now time.Time
	seq map[string]int64
}

func newBuilder() *builder {
	b := &builder{now: time.Unix(0, 0), seq: map[string]int64{}}
	b.r = history.NewRecorder(nil, func() time.Time { b.now = b.now.Add(time.Millisecond); return b.now })
	return b
}

func (b *builder) send(proc, v string, p int32, idem bool) history.Op {
	b.seq[proc]++
	return b.r.Invoke(history.Op{Process: proc, F: history.Send, Value: v, Partition: p, Idempotent: idem, Seq: b.seq[proc]})
}

func (b *builder) ok(inv history.Op, p int32, o int64) {
	b.r.Complete(inv, history.Op{Type: history.OK, Partition: p, Offset: o})
}

func (b *builder) fail(inv history.Op) {
	b.r.Complete(inv, history.Op{Type: history.Fail, Error: "NOT_LEADER_OR_FOLLOWER"})
}

func (b *builder) info(inv history.Op) {
	b.r.Complete(inv, history.Op{Type: history.Info, Error: "REQUEST_TIMED_OUT"})
}

// sendOK is a send acknowledged right away.
func (b *builder) sendOK(proc, v string, p int32, o int64) {
	b.ok(b.send(proc, v, p, true), p, o)
}

func (b *builder) poll(proc string, recs []history.Record, hwm ...history.Watermark) {
	inv := b.r.Invoke(history.Op{Process: proc, F: history.Poll})
	b.r.Complete(inv, history.Op{Type: history.OK, Records: recs, Watermarks: hwm})
}

// final records a complete final read of p via proxy: values at offsets
// start, start+1, ...
func (b *builder) final(via string, p int32, start int64, values ...string) {
	b.finalHWM(via, p, start, start+int64(len(values)), values...)
}

func (b *builder) finalHWM(via string, p int32, start, hwm int64, values ...string) {
	inv := b.r.Invoke(history.Op{Process: "final-" + via, F: history.FinalRead, Partition: p, Via: via})
	var recs []history.Record
	for i, v := range values {
		if v != "" {
			recs = append(recs, rec(p, start+int64(i), v))
		}
	}
	b.r.Complete(inv, history.Op{Type: history.OK, Offset: start, Records: recs,
		Watermarks: []history.Watermark{{Partition: p, HWM: hwm}}})
}

func (b *builder) finalBoth(p int32, values ...string) {
	b.final("proxy-a", p, 0, values...)
	b.final("proxy-b", p, 0, values...)
}

func rec(p int32, o int64, v string) history.Record {
	return history.Record{Partition: p, Offset: o, Value: v}
}

func hwm(p int32, h int64) history.Watermark { return history.Watermark{Partition: p, HWM: h} }

// clean is a history with every allowed irregularity and no anomaly.
func clean(b *builder) {
	b.sendOK("p1", "a", 0, 0)
	b.sendOK("p2", "b", 0, 1)
	x := b.send("p1", "x", 0, false)
	b.fail(x) // definitely not written, never seen
	i := b.send("p2", "i", 1, false)
	b.info(i) // written twice by an ambiguous retry: allowed, plain producer
	b.sendOK("p1", "c", 1, 2)
	j := b.send("p2", "j", 1, true) // idempotent, no outcome recorded: info
	_ = j
	b.poll("c1", []history.Record{rec(0, 0, "a"), rec(1, 0, "i")}, hwm(0, 1), hwm(1, 2))
	b.poll("c1", []history.Record{rec(0, 1, "b"), rec(1, 1, "i")}, hwm(0, 2), hwm(1, 3))
	b.finalBoth(0, "a", "b")
	b.finalBoth(1, "i", "i", "c", "j")
	b.r.Complete(b.r.Invoke(history.Op{Process: "nemesis", F: history.Fault, Fault: "kill-broker", Target: "broker-1"}),
		history.Op{Type: history.OK})
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *builder)
		want  []Kind // exactly these kinds, each at least once
	}{
		{"clean", clean, nil},
		{"two acks at one offset (KafScale race)", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p2", "b", 0, 0)
			b.finalBoth(0, "a")
		}, []Kind{InconsistentOffsets, LostWrite}},
		{"proxies disagree on a value", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.final("proxy-a", 0, 0, "a")
			b.final("proxy-b", 0, 0, "z")
		}, []Kind{InconsistentOffsets, Phantom}},
		{"polled value replaced after takeover", func(b *builder) {
			i := b.send("p1", "a", 0, false)
			b.info(i)
			b.poll("c1", []history.Record{rec(0, 0, "a")}, hwm(0, 1))
			b.sendOK("p2", "b", 0, 0)
			b.finalBoth(0, "b")
		}, []Kind{InconsistentOffsets, LostWrite}},
		{"acknowledged write lost", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, 1)
			b.finalBoth(0, "a")
		}, []Kind{LostWrite}},
		{"wrong acknowledged offset", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, 5)
			b.finalBoth(0, "a", "b")
		}, []Kind{WrongOffset}},
		{"acknowledged in another partition", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.finalBoth(0)
			b.finalBoth(1, "a")
		}, []Kind{WrongOffset}},
		{"definitely failed write visible", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			x := b.send("p1", "x", 0, false)
			b.fail(x)
			b.finalBoth(0, "a", "x")
		}, []Kind{G1a}},
		{"failed write seen only by a poll", func(b *builder) {
			x := b.send("p1", "x", 0, false)
			b.fail(x)
			b.poll("c1", []history.Record{rec(0, 0, "x")}, hwm(0, 1))
			b.finalBoth(0, "x")
		}, []Kind{G1a}},
		{"idempotent duplicate", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.finalBoth(0, "a", "a")
		}, []Kind{Duplicate}},
		{"idempotent info duplicate", func(b *builder) {
			i := b.send("p1", "a", 0, true)
			b.info(i)
			b.finalBoth(0, "a", "a")
		}, []Kind{Duplicate}},
		{"plain duplicate of an acknowledged send", func(b *builder) {
			s := b.send("p1", "a", 0, false)
			b.ok(s, 0, 1)
			b.finalBoth(0, "a", "a")
		}, []Kind{Duplicate}},
		{"per-producer order", func(b *builder) {
			x := b.send("p1", "a", 0, true)
			y := b.send("p1", "b", 0, true)
			b.ok(y, 0, 0)
			b.ok(x, 0, 1)
			b.finalBoth(0, "b", "a")
		}, []Kind{ProducerOrder}},
		{"real-time order", func(b *builder) {
			b.sendOK("p1", "a", 0, 1)
			b.sendOK("p2", "b", 0, 0)
			b.finalBoth(0, "b", "a")
		}, []Kind{RealtimeOrder}},
		{"concurrent sends may land in any order", func(b *builder) {
			x := b.send("p1", "a", 0, true)
			y := b.send("p2", "b", 0, true)
			b.ok(x, 0, 1)
			b.ok(y, 0, 0)
			b.finalBoth(0, "b", "a")
		}, nil},
		{"high watermark went down", func(b *builder) {
			b.poll("c1", nil, hwm(0, 5))
			b.poll("c1", nil, hwm(0, 3))
			b.finalBoth(0, "a", "b", "c", "d", "e")
		}, []Kind{HWMDecrease, Phantom}},
		{"different observers may lag", func(b *builder) {
			b.poll("c1", nil, hwm(0, 2))
			b.poll("c2", nil, hwm(0, 1))
			b.poll("c1", nil, hwm(0, -1))
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, 1)
			b.finalBoth(0, "a", "b")
		}, nil},
		{"final read failed", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.final("proxy-a", 0, 0, "a")
			inv := b.r.Invoke(history.Op{Process: "final-proxy-b", F: history.FinalRead, Partition: 0, Via: "proxy-b"})
			b.r.Complete(inv, history.Op{Type: history.Fail, Error: "timed out"})
		}, []Kind{IncompleteFinalRead}},
		{"final read has a hole", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, 2)
			b.final("proxy-a", 0, 0, "a", "", "b")
		}, []Kind{IncompleteFinalRead}},
		{"no final read at all", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
		}, []Kind{IncompleteFinalRead}},
		{"proxies disagree on the high watermark", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, 1)
			b.final("proxy-a", 0, 0, "a", "b")
			b.final("proxy-b", 0, 0, "a")
		}, []Kind{FinalReadDivergence}},
		{"acknowledged without an offset, present", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, -1)
			b.sendOK("p1", "c", 0, 2)
			b.finalBoth(0, "a", "b", "c")
		}, nil},
		{"acknowledged without an offset, lost", func(b *builder) {
			b.sendOK("p1", "a", 0, 0)
			b.sendOK("p1", "b", 0, -1)
			b.finalBoth(0, "a")
		}, []Kind{LostWrite}},
		{"log start after zero", func(b *builder) {
			b.final("proxy-a", 0, 10, "a")
			b.final("proxy-b", 0, 10, "a")
			b.sendOK("p1", "a", 0, 10)
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			res := Check(b.r.Ops(), Options{})
			var got []Kind
			for _, k := range Kinds {
				if res.Counts[k] > 0 {
					got = append(got, k)
				}
			}
			want := append([]Kind(nil), tc.want...)
			sort.Slice(want, func(i, j int) bool { return kindOrder(want[i]) < kindOrder(want[j]) })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("kinds = %v, want %v\n%s", got, want, describe(res))
			}
			if res.Valid != (len(want) == 0) {
				t.Fatalf("valid = %t with kinds %v", res.Valid, got)
			}
			for _, an := range res.Anomalies {
				if len(an.Ops) == 0 || an.Detail == "" {
					t.Errorf("anomaly without evidence: %+v", an)
				}
			}
		})
	}
}

func kindOrder(k Kind) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return len(Kinds)
}

func describe(res Result) string {
	var sb strings.Builder
	for _, an := range res.Anomalies {
		fmt.Fprintf(&sb, "  %s: %s (ops %v)\n", an.Kind, an.Detail, an.Ops)
	}
	return sb.String()
}

func TestCleanStats(t *testing.T) {
	b := newBuilder()
	clean(b)
	res := Check(b.r.Ops(), Options{})
	want := Stats{Sends: 6, SendsOK: 3, SendsFail: 1, SendsInfo: 2, SendsIdempotent: 4, InfoVisible: 2,
		Polls: 2, PolledRecords: 4, FinalReads: 4, FinalRecords: 12, DistinctValues: 5, AllowedDuplicate: 1, Faults: 1}
	if res.Stats != want {
		t.Fatalf("stats = %+v\nwant    %+v", res.Stats, want)
	}
	if res.Faults["kill-broker"] != 1 {
		t.Fatalf("faults = %v", res.Faults)
	}
	if ps := res.Partition[1]; ps.AckedSends != 1 || ps.FinalHWM != 4 {
		t.Fatalf("partition 1 stats = %+v", ps)
	}
}

func TestEvidenceNamesOps(t *testing.T) {
	b := newBuilder()
	b.sendOK("p1", "a", 0, 0) // ops 0, 1
	b.sendOK("p2", "b", 0, 0) // ops 2, 3
	b.finalBoth(0, "a")       // ops 4-7
	res := Check(b.r.Ops(), Options{})
	for _, an := range res.Anomalies {
		if an.Kind != InconsistentOffsets {
			continue
		}
		if fmt.Sprint(an.Values) != "[a b]" || fmt.Sprint(an.Ops) != "[1 3]" || an.Offset != 0 {
			t.Fatalf("evidence = %+v", an)
		}
		return
	}
	t.Fatalf("no inconsistent-offsets anomaly: %s", describe(res))
}

func TestMaxPerKindKeepsCounts(t *testing.T) {
	b := newBuilder()
	for i := range 10 {
		b.sendOK("p1", fmt.Sprint("v", i), 0, int64(i))
	}
	b.finalBoth(0)
	res := Check(b.r.Ops(), Options{MaxPerKind: 3})
	if res.Counts[LostWrite] != 10 || len(res.Anomalies) != 3 {
		t.Fatalf("counts %v, kept %d", res.Counts, len(res.Anomalies))
	}
}
