package proxy

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
)

// freeBuffers leaves k free buffers of size's class in p, as traffic
// before would have: what the lender may lend.
func freeBuffers(p *kwire.BufPool, k, size int) {
	bs := make([]*[]byte, k)
	for i := range bs {
		bs[i] = p.Get(size)
	}
	for _, b := range bs {
		p.Put(b)
	}
}

// TestLenderBound: frames still arriving are lent free buffers only while
// what is lent stays within the limit and the pool has one to spare; a
// refused frame is lent nothing and counts nothing, and done gives back
// exactly what its frame took.
func TestLenderBound(t *testing.T) {
	tests := []struct {
		name   string
		limit  int64
		spares int   // free 1 MiB buffers in the pool
		frames []int // sizes asked for, in turn, none done before the last
		want   []bool
	}{
		{name: "room for two", limit: 2 * mib, spares: 4, frames: []int{mib, mib, mib}, want: []bool{true, true, false}},
		{name: "pool runs dry", limit: 8 * mib, spares: 1, frames: []int{mib, mib}, want: []bool{true, false}},
		{name: "class above the limit", limit: mib, spares: 2, frames: []int{mib + 1, mib}, want: []bool{false, true}},
		{name: "beyond the pool's classes", limit: 64 * mib, spares: 1, frames: []int{17 * mib}, want: []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pool kwire.BufPool
			freeBuffers(&pool, tc.spares, mib)
			l := lender{limit: tc.limit}
			var dones []func()
			for i, n := range tc.frames {
				spare, done := l.forFrame(&pool)
				dones = append(dones, done)
				b := spare(n)
				if (b != nil) != tc.want[i] {
					t.Fatalf("frame %d of %d bytes: lent %v, want %v", i, n, b != nil, tc.want[i])
				}
				if b != nil && cap(*b) < n {
					t.Fatalf("frame %d of %d bytes lent a buffer of %d", i, n, cap(*b))
				}
				if got := l.lent.Load(); got > tc.limit {
					t.Fatalf("after frame %d, %d bytes lent, above the limit %d", i, got, tc.limit)
				}
			}
			for _, done := range dones {
				done()
			}
			if got := l.lent.Load(); got != 0 {
				t.Fatalf("%d bytes still counted as lent after every frame is done", got)
			}
		})
	}
}

// TestServerLendsWithinLimit: four addresses send the first 300 KiB of
// 2 MiB frames while the pool holds four free buffers of that size; the
// proxy lends two (a 16 MiB budget lends at most 4 MiB), the frames are
// read and answered, and what was lent is given back, whether the frames
// finish or their connections close mid-frame.
func TestServerLendsWithinLimit(t *testing.T) {
	const budget, frame, first = 16 * mib, 2*mib - 64<<10, 300 << 10
	for _, finish := range []bool{true, false} {
		t.Run(map[bool]string{true: "frames finish", false: "connections close mid-frame"}[finish], func(t *testing.T) {
			ts := startServer(t, Config{Logger: slog.New(slog.DiscardHandler),
				Limits: Limits{QueuedMaxRequestBytes: budget, RequestReadTimeout: time.Hour}}, newFakeDispatcher(false))
			freeBuffers(ts.bufs, 4, frame)
			id := "test"
			req := kwire.AppendRequestHeader(nil, 18, 3, 9, &id, true)
			sized := append(req, make([]byte, frame-len(req))...)
			kwire.FinishFrame(sized)
			var holders []*testClient
			for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
				c := dialFrom(t, ts, ip)
				c.raw(sized[:first])
				holders = append(holders, c)
			}
			limit := lendLimit(budget)
			waitFor(t, func() bool { return ts.g.lend.lent.Load() == limit }, "two holders lent a spare each")
			for _, c := range holders {
				if !finish {
					c.nc.Close()
					continue
				}
				c.raw(sized[first:])
				if corr, _ := c.read(); corr != 9 {
					t.Fatalf("answered with correlation id %d, want 9", corr)
				}
			}
			waitFor(t, func() bool { return ts.g.lend.lent.Load() == 0 }, "every lent buffer given back")
			if !finish {
				waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) == 0 }, "the closed holders' reservations given back")
			}
		})
	}
}
