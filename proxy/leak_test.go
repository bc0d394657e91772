package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
)

// pooledDispatcher answers each request with a body of the size its
// payload's first 4 bytes ask for, taken from the server's frame pool and
// handed back by the reply's Release, as broker answers are. live counts
// the bodies not released: the owner of every one must release it.
type pooledDispatcher struct {
	bufs  *kwire.BufPool
	live  atomic.Int64
	begun atomic.Int64
	hold  chan struct{} // if set, each call waits for a receive before answering
}

type pooledCall struct {
	d    *pooledDispatcher
	size int
}

func (d *pooledDispatcher) Begin(_ context.Context, _ uint64, _ apis.Header, body []byte) call {
	d.begun.Add(1)
	size := 0
	if len(body) >= 4 {
		size = int(binary.BigEndian.Uint32(body))
	}
	return &pooledCall{d: d, size: size}
}

func (c *pooledCall) Finish(ctx context.Context) (apis.Reply, error) {
	if c.d.hold != nil {
		select {
		case <-c.d.hold:
		case <-ctx.Done():
			return apis.Reply{}, ctx.Err()
		}
	}
	b := c.d.bufs.Get(c.size)
	*b = (*b)[:c.size]
	c.d.live.Add(1)
	var once atomic.Bool
	return apis.Reply{Body: *b, Release: func() {
		if once.CompareAndSwap(false, true) {
			c.d.live.Add(-1)
			c.d.bufs.Put(b)
		}
	}}, nil
}

// askFor is a request payload asking pooledDispatcher for n bytes.
func askFor(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// heapAfterGC is the live heap once the frame pool has dropped what it
// keeps (two idle trims) and two collections emptied the sync.Pools.
func heapAfterGC(bufs *kwire.BufPool) uint64 {
	bufs.Trim()
	bufs.Trim()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * testWait)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines %s after the clients left, %d at the start:\n%s",
				runtime.NumGoroutine(), 3*testWait, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const mib = 1 << 20

// TestLeakPatterns runs rounds of the hostile patterns of issue 20 against
// a server whose answers are pooled frames: clients that pipeline requests
// and never read, that close in the middle of a large answer, and that
// send half a frame. After the clients leave, every answer was released by
// whoever dropped it, the heap after GC is within 16 MiB of where it
// started and the goroutines are back to their count at the start.
func TestLeakPatterns(t *testing.T) {
	bufs := new(kwire.BufPool)
	d := &pooledDispatcher{bufs: bufs}
	ts := startServerWith(t, Config{Logger: slog.New(slog.DiscardHandler), WriteTimeout: testWait,
		Limits: Limits{RequestReadTimeout: 200 * time.Millisecond}}, d, func(dp *deps) { dp.bufs = bufs })
	const rounds, conns = 4, 4
	patterns := []struct {
		name string
		run  func(t *testing.T, c *testClient)
	}{
		{"pipelined and never read", func(t *testing.T, c *testClient) {
			mutes := testutil.ToFloat64(ts.m.mutes)
			for i := range 100 {
				c.send(1, 4, int32(i), askFor(mib))
			}
			waitFor(t, func() bool { return testutil.ToFloat64(ts.m.mutes) > mutes }, "the connection to be muted")
		}},
		{"closed mid-response", func(t *testing.T, c *testClient) {
			c.send(1, 4, 1, askFor(8*mib))
			_ = c.nc.SetReadDeadline(time.Now().Add(testWait))
			if _, err := io.ReadFull(c.br, make([]byte, 64<<10)); err != nil {
				t.Fatalf("read the start of the answer: %v", err)
			}
		}},
		{"half-sent frame", func(t *testing.T, c *testClient) {
			cut := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badReadTime))
			c.raw(binary.BigEndian.AppendUint32(nil, 900<<10))
			c.raw(make([]byte, 300<<10))
			waitFor(t, func() bool { return testutil.ToFloat64(ts.g.badInput.WithLabelValues(badReadTime)) > cut },
				"the half-sent frame to be cut by request-read-timeout")
			c.expectClosed()
		}},
	}
	// Warm up: the first connection and answer allocate what stays
	// (pools, metrics children, the runtime's own).
	warm := dial(t, ts)
	warm.send(1, 4, 1, askFor(mib))
	warm.read()
	warm.nc.Close()
	waitFor(t, func() bool { return testutil.ToFloat64(ts.m.conns) == 0 }, "the warm-up connection to end")
	goroutines := runtime.NumGoroutine()
	heap0 := heapAfterGC(bufs)
	for _, p := range patterns {
		t.Run(p.name, func(t *testing.T) {
			for range rounds {
				cs := make([]*testClient, conns)
				for i := range cs {
					cs[i] = dial(t, ts)
					p.run(t, cs[i])
				}
				for _, c := range cs {
					c.nc.Close()
				}
				waitFor(t, func() bool { return testutil.ToFloat64(ts.m.conns) == 0 }, "every connection to end")
			}
			waitFor(t, func() bool { return d.live.Load() == 0 }, fmt.Sprintf("every answer released (%d not)", d.live.Load()))
			waitGoroutines(t, goroutines+1) // +1: the subtest's own
			heap := heapAfterGC(bufs)
			t.Logf("heap after GC: %.1f MiB at the start, %.1f MiB after %d rounds of %d connections",
				float64(heap0)/mib, float64(heap)/mib, rounds, conns)
			if heap > heap0+16*mib {
				t.Fatalf("heap after GC grew from %.1f to %.1f MiB with no connection open", float64(heap0)/mib, float64(heap)/mib)
			}
		})
	}
}

// TestMuteWhileUnsent: a connection whose answers wait unwritten beyond
// max-unsent-bytes is not read any further (its next request does not reach
// the dispatcher); once its client reads them, reading resumes. Metadata
// requests: fetches wait for each other anyway (TestOneFetchAtATime).
func TestMuteWhileUnsent(t *testing.T) {
	bufs := new(kwire.BufPool)
	d := &pooledDispatcher{bufs: bufs, hold: make(chan struct{})}
	ts := startServerWith(t, Config{Logger: slog.New(slog.DiscardHandler), WriteTimeout: time.Minute,
		Limits: Limits{MaxUnsentBytesPerConn: 64 << 10}}, d, func(dp *deps) { dp.bufs = bufs })
	c := dial(t, ts)
	// Two requests read and begun (the reader holds a ticket for a third
	// while it waits for bytes), answered together with more than the
	// loopback socket buffers take (a few MiB each way).
	c.send(3, 4, 1, askFor(16*mib))
	c.send(3, 4, 2, askFor(16*mib))
	waitFor(t, func() bool { return d.begun.Load() == 2 }, "two requests begun")
	d.hold <- struct{}{}
	d.hold <- struct{}{}
	waitFor(t, func() bool { return unsent(ts) == 32*mib+2*8 }, "both answers waiting to be written")
	c.send(3, 4, 3, askFor(16)) // read on the ticket reserved before the mute
	waitFor(t, func() bool { return d.begun.Load() == 3 }, "the third request begun")
	waitFor(t, func() bool { return testutil.ToFloat64(ts.m.mutes) == 1 }, "the connection muted")
	waitFor(t, func() bool { return mutedWaits(ts) >= 1 }, "the reader to wait, muted, before reading more")
	c.send(3, 4, 4, askFor(16))
	d.hold <- struct{}{} // the third answers: nothing else may begin
	if n := d.begun.Load(); n != 3 {
		t.Fatalf("%d requests begun while muted, want 3", n)
	}
	for i := int32(1); i <= 3; i++ {
		_ = c.nc.SetReadDeadline(time.Now().Add(testWait))
		if corr, _ := c.read(); corr != i {
			t.Fatalf("answer %d has correlation id %d", i, corr)
		}
	}
	waitFor(t, func() bool { return d.begun.Load() == 4 }, "the fourth request begun once the answers were read")
	d.hold <- struct{}{}
	if corr, _ := c.read(); corr != 4 {
		t.Fatalf("answer has correlation id %d, want 4", corr)
	}
}

// mutedWaits is how often the server's connections waited, muted.
func mutedWaits(ts *testServer) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for c := range ts.conns {
		c.seq.mu.Lock()
		n += c.seq.mutedWaits
		c.seq.mu.Unlock()
	}
	return n
}

// unsent is the unsent answer bytes of the server's connections.
func unsent(ts *testServer) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for c := range ts.conns {
		c.seq.mu.Lock()
		n += c.seq.unsent
		c.seq.mu.Unlock()
	}
	return n
}

// TestFairBudget: six connections from one IP each claim a 900 KiB frame
// and send a third of it, with a 4 MiB budget, as in issue 20. A
// well-behaved client's ApiVersions is answered at once: the shares of
// unfinished frames close the connections that would pass them, or
// request-read-timeout cuts the frames that stopped arriving; each cut is
// counted under its reason. Before these, the budget's first waiter (a
// half-read frame, for GrowWait) held every new request behind it.
func TestFairBudget(t *testing.T) {
	const budget = 4 * mib
	holding := func(n float64) func(ts *testServer) bool {
		return func(ts *testServer) bool { return testutil.ToFloat64(ts.g.queued) >= n }
	}
	cuts := func(reason string, n float64) func(ts *testServer) bool {
		return func(ts *testServer) bool { return testutil.ToFloat64(ts.g.badInput.WithLabelValues(reason)) == n }
	}
	for _, tc := range []struct {
		name   string
		lim    Limits
		reason string
		ready  func(ts *testServer) bool // the attackers are where the case needs them
	}{
		// Each frame holds its 300 KiB and 32 to 64 KiB ahead: four fit
		// the 1.5 MiB share, five do not, so two of the six are closed.
		{"per-IP share", Limits{MaxPartialFrameBytesPerIP: 1536 << 10, RequestReadTimeout: time.Hour},
			badIPShare, cuts(badIPShare, 2)},
		{"per-connection share", Limits{MaxPartialFrameBytesPerConn: 256 << 10, MaxPartialFrameBytesPerIP: budget,
			RequestReadTimeout: time.Hour}, badConnShare, cuts(badConnShare, 6)},
		// The frames hold 2.2 MiB, within every share; the cut comes from
		// the timeout.
		{"request read timeout", Limits{MaxPartialFrameBytesPerIP: 2 * budget, RequestReadTimeout: 300 * time.Millisecond},
			badReadTime, holding(6 * 300 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.lim
			lim.QueuedMaxRequestBytes, lim.GrowWait = budget, time.Minute
			ts := startServer(t, Config{Logger: slog.New(slog.DiscardHandler), Limits: lim}, newFakeDispatcher(false))
			for range 6 {
				c := dial(t, ts)
				// Errors ignored: a connection over its share is closed
				// while it writes.
				_, _ = c.nc.Write(binary.BigEndian.AppendUint32(nil, 900<<10))
				_, _ = c.nc.Write(make([]byte, 300<<10))
			}
			waitFor(t, func() bool { return tc.ready(ts) }, "the attackers in place")
			good := dial(t, ts)
			good.send(18, 3, 7, []byte{0, 0, 0}) // ApiVersions v3: empty name and version, no tags
			if corr, _ := good.read(); corr != 7 {
				t.Fatalf("ApiVersions answered with correlation id %d, want 7", corr)
			}
			waitFor(t, func() bool { return testutil.ToFloat64(ts.g.badInput.WithLabelValues(tc.reason)) >= 1 },
				fmt.Sprintf("kproxy_bad_input_total{reason=%q} to count the cut", tc.reason))
		})
	}
}

// TestOneFetchAtATime: a connection that pipelines fetches and reads
// nothing has one begun at a time: the next is begun only once the answer
// before it is written, so it holds one fetch answer, not one per ticket.
// Another API pipelines past a waiting fetch's predecessors as before.
func TestOneFetchAtATime(t *testing.T) {
	bufs := new(kwire.BufPool)
	d := &pooledDispatcher{bufs: bufs, hold: make(chan struct{})}
	ts := startServerWith(t, Config{Logger: slog.New(slog.DiscardHandler), WriteTimeout: time.Minute}, d,
		func(dp *deps) { dp.bufs = bufs })
	c := dial(t, ts)
	for i := int32(1); i <= 3; i++ {
		c.send(1, 11, i, askFor(mib))
	}
	waitFor(t, func() bool { return d.begun.Load() == 1 }, "the first fetch begun")
	waitFor(t, func() bool { return seqStat(ts, func(s *sequencer) int { return s.fetchWaits }) == 1 },
		"the second fetch to wait for the first's answer")
	if n := d.begun.Load(); n != 1 {
		t.Fatalf("%d fetches begun, want 1", n)
	}
	for i := int32(1); i <= 3; i++ {
		d.hold <- struct{}{}
		if corr, _ := c.read(); corr != i {
			t.Fatalf("answer has correlation id %d, want %d", corr, i)
		}
	}
	if n := d.begun.Load(); n != 3 {
		t.Fatalf("%d fetches begun, want 3", n)
	}
}

// seqStat sums f over the server's connections' sequencers.
func seqStat(ts *testServer, f func(*sequencer) int) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for c := range ts.conns {
		c.seq.mu.Lock()
		n += f(c.seq)
		c.seq.mu.Unlock()
	}
	return n
}
