package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
)

// TestBudgetPausesReadsNotConnections: with the budget spent by a held
// request, another connection's frame waits unread, then is served once the
// first finishes; nobody is disconnected.
func TestBudgetPausesReadsNotConnections(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{Limits: Limits{QueuedMaxRequestBytes: 1000, MaxPartialFrameBytesPerConn: 1000, MaxPartialFrameBytesPerIP: 1000}}, d)
	a, b := dial(t, ts), dial(t, ts)
	a.send(3, 4, 1, make([]byte, 900))
	first := d.next(t)
	waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) > 900 }, "the first frame to hold the budget")
	b.send(3, 4, 2, make([]byte, 200))
	select {
	case c := <-d.begun:
		t.Fatalf("request %d began while the budget was spent", c.h.CorrelationID)
	case <-time.After(100 * time.Millisecond): // absence cannot be signalled
	}
	first.answer()
	if corr, _ := a.read(); corr != 1 {
		t.Fatalf("a got %d", corr)
	}
	d.next(t).answer()
	if corr, _ := b.read(); corr != 2 {
		t.Fatalf("b got %d", corr)
	}
	waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) == 0 }, "the budget to be returned")
}

// TestFrameOverBudgetCloses: a frame larger than the whole budget could
// never be read, so its connection closes instead of waiting forever.
func TestFrameOverBudgetCloses(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{Limits: Limits{QueuedMaxRequestBytes: 100}}, d)
	c := dial(t, ts)
	c.send(3, 4, 1, make([]byte, 200))
	c.expectClosed()
	if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badOverBudget)); v != 1 {
		t.Fatalf("%s count = %v, want 1", badOverBudget, v)
	}
}

// TestClaimedLengthsCostNothing: claims of 96 MiB with a few bytes behind
// them reserve only those bytes and one read chunk each, neither budget nor
// memory for the rest, so a small frame from another client is served at
// once (before, three such claims spent the budget and stalled every other
// client).
func TestClaimedLengthsCostNothing(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{}, d)
	const claim = 96 << 20
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		c := dial(t, ts)
		c.raw(binary.BigEndian.AppendUint32(nil, claim))
		c.raw([]byte{0, 3, 0, 4})
	}
	waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) == 3*(4+kwire.ReadChunkBytes) },
		"each claim to reserve its bytes and one chunk")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Fatalf("heap grew %d MiB for claims of 8 bytes each", grew>>20)
	}
	good := dial(t, ts)
	good.send(3, 4, 7, nil)
	if corr, _ := good.read(); corr != 7 {
		t.Fatalf("got %d", corr)
	}
}

// TestHalfReadFramesDoNotDeadlock: two frames, each half read with the
// budget spent between them, would wait for each other for ever; the total
// share of unfinished frames closes the larger holder
// (partial_total_share) and the other's frame is read and served.
func TestHalfReadFramesDoNotDeadlock(t *testing.T) {
	d := newFakeDispatcher(false)
	const chunk = kwire.ReadChunkBytes
	ts := startServer(t, Config{Limits: Limits{QueuedMaxRequestBytes: 10 * chunk, GrowWait: time.Minute,
		MaxPartialFrameBytesPerConn: 32 * chunk, MaxPartialFrameBytesPerIP: 32 * chunk}}, d)
	// Each frame alone fits the 8.75 chunks outside the reserve; both do not.
	id := "test"
	frame := kwire.AppendRequestHeader(nil, 3, 4, 1, &id, false)
	frame = append(frame, make([]byte, 6*chunk)...)
	kwire.FinishFrame(frame)
	results := make(chan error, 2)
	conns := []*testClient{dial(t, ts), dial(t, ts)}
	const half = 3 * chunk
	for _, c := range conns {
		c.raw(frame[:half]) // each holds half its frame and a chunk ahead
	}
	waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) >= 2*half }, "both frames to hold their first half")
	for _, c := range conns {
		go func() {
			// The server may close this connection mid-frame: a failed
			// write shows up as a failed read below.
			_, _ = c.nc.Write(frame[half:])
		}()
		go func() {
			_ = c.nc.SetReadDeadline(time.Now().Add(testWait))
			f, err := kwire.ReadFrame(c.br, 4, 1<<30, nil)
			if err == nil && binary.BigEndian.Uint32(*f) != 1 {
				err = errors.New("answer to another request")
			}
			results <- err
		}()
	}
	served, closed := 0, 0
	for range 2 {
		select {
		case err := <-results:
			if err == nil {
				served++
			} else {
				closed++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("neither half-read frame finished within 10 s: deadlocked")
		}
	}
	if served != 1 || closed != 1 {
		t.Fatalf("served %d, closed %d: want one of each", served, closed)
	}
	if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badAllShare)); v != 1 {
		t.Fatalf("%s count = %v, want 1", badAllShare, v)
	}
	waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) == 0 }, "the budget to be returned")
}

func TestConnectionLimits(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{Limits: Limits{MaxConnections: 3, MaxConnectionsPerIP: 2}}, d)
	served := func(c *testClient, corr int32) {
		t.Helper()
		c.send(3, 4, corr, nil)
		if got, _ := c.read(); got != corr {
			t.Fatalf("got %d, want %d", got, corr)
		}
	}
	a, b := dial(t, ts), dial(t, ts)
	served(a, 1)
	served(b, 2)
	over := dial(t, ts)
	over.expectClosed()
	if v := testutil.ToFloat64(ts.g.refused.WithLabelValues(refusedPerIP)); v != 1 {
		t.Fatalf("per-ip refusals = %v", v)
	}
	// Another IP (127.0.0.2 is loopback on Linux) still gets in, up to the total.
	other := dialFrom(t, ts, "127.0.0.2")
	served(other, 3)
	fourth := dialFrom(t, ts, "127.0.0.3")
	fourth.expectClosed()
	if v := testutil.ToFloat64(ts.g.refused.WithLabelValues(refusedMax)); v != 1 {
		t.Fatalf("max refusals = %v", v)
	}
	a.nc.Close() // a slot frees when a connection ends
	waitFor(t, func() bool { return testutil.ToFloat64(ts.m.conns) == 2 }, "a's connection to end")
	served(dial(t, ts), 4)
}

func dialFrom(t *testing.T, ts *testServer, ip string) *testClient {
	t.Helper()
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: testWait}
	nc, err := dl.Dial("tcp", ts.Addr())
	if err != nil {
		t.Skipf("cannot dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// TestIdleTimeout: a silent connection closes after the timeout; one with a
// request outstanding (a long poll) does not.
func TestIdleTimeout(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{Limits: Limits{IdleTimeout: 150 * time.Millisecond}}, d)
	idle, waiting := dial(t, ts), dial(t, ts)
	waiting.send(3, 4, 1, nil)
	held := d.next(t)
	idle.expectClosed()
	time.Sleep(300 * time.Millisecond) // two timeouts pass with the request outstanding
	held.answer()
	if corr, _ := waiting.read(); corr != 1 {
		t.Fatalf("got %d", corr)
	}
	waiting.expectClosed() // idle now
	if v := testutil.ToFloat64(ts.g.refused.WithLabelValues(closedIdle)); v != 2 {
		t.Fatalf("idle closes = %v, want 2", v)
	}
}

// TestBadInputLogIsRateLimited: many bad frames of one reason make one log
// line, while the metric counts each.
func TestBadInputLogIsRateLimited(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &out}, nil))
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{MaxFrameBytes: 1 << 10, Logger: log, Limits: Limits{BadInputLogInterval: time.Hour}}, d)
	const n = 20
	for range n {
		c := dial(t, ts)
		c.raw([]byte{0xff, 0xff, 0xff, 0xf0})
		c.expectClosed()
	}
	if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badFrameSize)); v != n {
		t.Fatalf("%s count = %v, want %d", badFrameSize, v, n)
	}
	if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badHeader)); v != 0 {
		t.Fatalf("%s count = %v, want 0", badHeader, v)
	}
	mu.Lock()
	defer mu.Unlock()
	if lines := strings.Count(out.String(), "reason="+badFrameSize); lines != 1 {
		t.Fatalf("%d log lines for %d bad frames:\n%s", lines, n, out.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
