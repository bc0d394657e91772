package upstream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// fakeClock is the pool's injected clock: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func onDemand(p *Pool, state string) float64 {
	return testutil.ToFloat64(p.m.serial.WithLabelValues("1", state))
}

func waitCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kproxy_upstream_connection_wait_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// TestInOrderConnsOnDemand: against a broker that answers one request per
// connection at a time, requests of different client connections
// (affinities) held by the broker each get a connection of their own, so
// the broker works on all of them at once; once answered the connections
// are idle and reused, the most recently used first, and an affinity's next
// request follows its outstanding one on the same connection.
func TestInOrderConnsOnDemand(t *testing.T) {
	fb, p, reg := inOrderPool(t, Config{ConnsPerBroker: 1})

	const n = 8
	pends := make([]Pending, n)
	held := make([]*received, n)
	conns := map[int]bool{}
	for i := range n {
		pends[i] = sendReq(t, p, uint64(i+1), produce())
		held[i] = recvKey(t, fb, keyProduce) // arrives although the others are unanswered
		if conns[held[i].conn] {
			t.Fatalf("produce of affinity %d on connection %d, which carries another's", i+1, held[i].conn)
		}
		conns[held[i].conn] = true
	}
	if got := onDemand(p, "busy"); got != n {
		t.Fatalf("busy on-demand connections = %v, want %d", got, n)
	}
	// Affinity 1's next request follows its first on that connection: the
	// broker reads it only once the first is answered.
	next := sendReq(t, p, 1, produce())
	held[0].replyEmpty()
	mustWait(t, pends[0], "first produce of affinity 1")
	if r := recvKey(t, fb, keyProduce); r.conn != held[0].conn {
		t.Fatalf("affinity 1's second produce on connection %d, its first on %d", r.conn, held[0].conn)
	} else {
		r.replyEmpty()
	}
	mustWait(t, next, "second produce of affinity 1")
	for i := 1; i < n; i++ {
		held[i].replyEmpty()
		mustWait(t, pends[i], "held produce")
	}
	waitFor(t, func() bool { return onDemand(p, "idle") == n && onDemand(p, "busy") == 0 }, "every on-demand connection idle")
	// A new affinity reuses the connection that became idle last.
	fb.mu.Lock()
	accepted := len(fb.conns)
	fb.mu.Unlock()
	again := sendReq(t, p, 99, produce())
	if r := recvKey(t, fb, keyProduce); r.conn != held[n-1].conn {
		t.Fatalf("new affinity's produce on connection %d, want the last idle one, %d", r.conn, held[n-1].conn)
	} else {
		r.replyEmpty()
	}
	mustWait(t, again, "produce on a reused connection")
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.conns) != accepted {
		t.Fatalf("broker accepted %d connections, %d before: an idle one was not reused", len(fb.conns), accepted)
	}
	if c := waitCount(t, reg); c != n+2 {
		t.Fatalf("connection waits observed = %d, want %d", c, n+2)
	}
}

// TestInOrderConnLimit: at MaxConnsPerBroker busy connections a request
// waits for one, fails with ErrNotSent when its context ends first, and
// takes the first one freed.
func TestInOrderConnLimit(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{MaxConnsPerBroker: 2})

	a := sendReq(t, p, 1, produce())
	ra := recvKey(t, fb, keyProduce)
	b := sendReq(t, p, 2, produce())
	rb := recvKey(t, fb, keyProduce)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := produce()
	_, err := p.Send(ctx, 1, 3, Request{Key: req.Key(), Version: req.GetVersion(), Body: Raw(req.AppendTo(nil)), Hold: testHold(req)})
	if !errors.Is(err, retry.ErrNotSent) || !strings.Contains(err.Error(), "wait for one of 2 connections") {
		t.Fatalf("send at the limit: err = %v, want ErrNotSent after waiting for a connection", err)
	}

	sent := make(chan Pending, 1)
	go func() {
		pend, err := p.Send(context.Background(), 1, 3, Request{Key: req.Key(), Version: req.GetVersion(), Body: Raw(req.AppendTo(nil)), Hold: testHold(req)})
		if err != nil {
			t.Errorf("send waiting at the limit: %v", err)
		}
		sent <- pend
	}()
	select {
	case <-sent:
		t.Fatal("a third affinity's send returned while both connections were busy")
	case <-time.After(20 * time.Millisecond):
	}
	rb.replyEmpty()
	mustWait(t, b, "second produce")
	third := <-sent
	if third == nil {
		return
	}
	if r := recvKey(t, fb, keyProduce); r.conn != rb.conn {
		t.Fatalf("waiting produce on connection %d, want the freed one, %d", r.conn, rb.conn)
	} else {
		r.replyEmpty()
	}
	mustWait(t, third, "produce that waited")
	ra.replyEmpty()
	mustWait(t, a, "first produce")
}

// TestInOrderIdleConnsClose: the janitor's sweep closes on-demand
// connections idle for IdleTimeout on the pool's clock, and only those.
func TestInOrderIdleConnsClose(t *testing.T) {
	fb := newInOrderFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	p, _ := newTestPool(t, Config{IdleTimeout: time.Hour, Now: clock.Now}, res)

	old := sendReq(t, p, 1, produce())
	ro := recvKey(t, fb, keyProduce)
	ro.replyEmpty()
	mustWait(t, old, "produce")
	waitFor(t, func() bool { return onDemand(p, "idle") == 1 }, "the connection idle")

	clock.advance(time.Hour - time.Second)
	recent := sendReq(t, p, 1, produce()) // reuses the idle one: idle again from now
	recvKey(t, fb, keyProduce).replyEmpty()
	mustWait(t, recent, "produce on the reused connection")
	waitFor(t, func() bool { return onDemand(p, "idle") == 1 }, "the connection idle again")
	clock.advance(time.Second)
	p.sweepIdle()
	if got := onDemand(p, "idle"); got != 1 {
		t.Fatalf("idle connections after a sweep = %v, want 1: it was used %v ago", got, time.Second)
	}
	clock.advance(time.Hour)
	p.sweepIdle()
	select {
	case idx := <-fb.closed:
		if idx != ro.conn {
			t.Fatalf("connection %d closed, want the idle on-demand one, %d", idx, ro.conn)
		}
	case <-time.After(testWait):
		t.Fatalf("idle connection still open %s after the sweep", testWait)
	}
	waitFor(t, func() bool { return onDemand(p, "idle") == 0 && onDemand(p, "busy") == 0 }, "no on-demand connection left")
	// The next request opens a new one.
	after := sendReq(t, p, 1, produce())
	if r := recvKey(t, fb, keyProduce); r.conn == ro.conn {
		t.Fatal("a request went to the closed connection")
	} else {
		r.replyEmpty()
	}
	mustWait(t, after, "produce after the idle close")
}

func acksZero() *kmsg.ProduceRequest {
	req := produce()
	req.Acks = 0
	return req
}

func expectBarrier(t *testing.T, fb *fakeBroker, conn int) {
	t.Helper()
	select {
	case idx := <-fb.barriers:
		if idx != conn {
			t.Fatalf("barrier on connection %d, want %d", idx, conn)
		}
	case <-time.After(testWait):
		t.Fatalf("no barrier on connection %d within %s", conn, testWait)
	}
}

// TestInOrderAcksZeroKeepsConnection: an acks=0 produce, which the broker
// never answers, keeps its affinity's on-demand connection after it is
// written, until a barrier written behind it is answered; meanwhile
// another affinity gets a connection of its own and the same affinity's
// next request follows on the same connection, so an in-order broker
// appends one client's acks=0 produces in the order they were sent. A
// connection lost with acks=0 produces held lets their place go.
func TestInOrderAcksZeroKeepsConnection(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{ConnsPerBroker: 1})

	first := sendReq(t, p, 1, acksZero())
	mustWait(t, first, "first acks=0 produce")
	r1 := recvKey(t, fb, keyProduce) // the broker works on it: it reads nothing more from that connection

	other := sendReq(t, p, 2, produce())
	r2 := recvKey(t, fb, keyProduce)
	if r2.conn == r1.conn {
		t.Fatalf("another affinity's produce on connection %d, which holds an unconfirmed acks=0 produce", r2.conn)
	}
	second := sendReq(t, p, 1, acksZero())
	mustWait(t, second, "second acks=0 produce")
	r1.processed()
	if r := recvKey(t, fb, keyProduce); r.conn != r1.conn {
		t.Fatalf("second acks=0 produce on connection %d, the first on %d", r.conn, r1.conn)
	} else {
		r.processed()
	}
	expectBarrier(t, fb, r1.conn)
	r2.replyEmpty()
	mustWait(t, other, "other affinity's produce")
	waitFor(t, func() bool { return onDemand(p, "idle") == 2 && onDemand(p, "busy") == 0 }, "both connections idle once the barrier is answered")

	// The most recently idle connection is taken again; lost with an acks=0
	// produce unconfirmed, it holds no place.
	third := sendReq(t, p, 3, acksZero())
	mustWait(t, third, "third acks=0 produce")
	r3 := recvKey(t, fb, keyProduce)
	if got := onDemand(p, "busy"); got != 1 {
		t.Fatalf("busy on-demand connections with an unconfirmed acks=0 produce = %v, want 1", got)
	}
	fb.kill(r3.conn)
	waitFor(t, func() bool { return onDemand(p, "idle") == 1 && onDemand(p, "busy") == 0 }, "the lost connection's place given up")
}
