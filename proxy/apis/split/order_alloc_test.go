package split

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/routing"
)

// acceptSender accepts every sub-request for partition 0 at once, with
// an answer it allocates once.
type acceptSender struct{ answer done }

func (f *acceptSender) Send(context.Context, int32, uint64, upstream.Request) (upstream.Pending, error) {
	return f.answer, nil
}

// acceptRig runs one-item produces to partition 0 of "t" on connection testConn,
// each accepted at once; run(ordered) is one request.
func acceptRig(tb testing.TB) (run func(ordered bool)) {
	rt := routing.NewTable()
	rt.SetBroker(routing.Broker{ID: 1, Addr: "b1:9092"})
	rt.SetTopic(routing.Topic{Name: "t", Partitions: 1})
	rt.SetOwner("t", 0, 1)
	env := &Env{
		Routes: rt, Sender: &acceptSender{answer: done{0, 0}}, Log: slog.New(slog.DiscardHandler), Now: time.Now,
		Metrics: noMetrics{}, Bufs: &kwire.BufPool{},
		Backoff: func(int, time.Time) (time.Duration, bool) { return 0, false },
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() {
		cancel()
		env.Close()
	})
	a := &toy{parts: []byte{0}, answers: make([]int16, 1)}
	return func(ordered bool) {
		a.s.Reset()
		a.s.Init(env, a, Request{Key: 0, Conn: testConn, Deadline: time.Now().Add(time.Minute), RouteBy: ByPartitionWrite, Ordered: ordered})
		a.s.Reserve(1)
		a.s.Add("t", [16]byte{}, 0, 0, 0)
		a.s.Dispatch(ctx, nil)
		ans, err := a.s.Finish(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if ans.Release != nil {
			ans.Release()
		}
	}
}

// TestOrderedCostsNoAllocation: once its connection's lines are warm, an
// ordered produce that needs no retry allocates no more than an unordered
// one.
func TestOrderedCostsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector sync.Pool drops buffers at random, so allocations vary")
	}
	run := acceptRig(t)
	run(true) // warms the connection's lines
	plain := testing.AllocsPerRun(200, func() { run(false) })
	ordered := testing.AllocsPerRun(200, func() { run(true) })
	if ordered > plain {
		t.Fatalf("an ordered produce allocates %.1f times, an unordered one %.1f: the lines cost allocations", ordered, plain)
	}
}

// BenchmarkOrderedProduce: what the lines cost a produce that needs no
// retry (compare plain and ordered).
func BenchmarkOrderedProduce(b *testing.B) {
	for _, ordered := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "ordered"}[ordered]
		b.Run(name, func(b *testing.B) {
			run := acceptRig(b)
			b.ReportAllocs()
			for b.Loop() {
				run(ordered)
			}
		})
	}
}
