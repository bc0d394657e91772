package upstream

// Dialing a broker again after failures, and closing the connections of
// brokers that left or were evicted.

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/retry"
)

func TestRedialWithBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: dials are refused
	res := &resolver{}
	res.set(1, addr)
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, BackoffMin: time.Hour, BackoffMax: time.Hour}, res)

	if err := sendAndWait(t, p, "x"); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("dial failure: err = %v, want ErrNotSent", err)
	}
	if _, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "y"))}); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("send during backoff: err = %v, want ErrNotSent", err)
	}
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindDial)); v != 1 {
		t.Fatalf("dial errors = %v, want 1 (no dial during backoff)", v)
	}
}

func TestRedialAfterRefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := &resolver{}
	res.set(1, addr)
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	if err := sendAndWait(t, p, "x"); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("dial failure: err = %v, want ErrNotSent", err)
	}

	ln, err = net.Listen("tcp", addr) // the broker comes back at the same address
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	fb := &fakeBroker{t: t, ln: ln, flex: kwire.NewFlexTable(), reqs: make(chan *received, 16), hellos: make(chan *kmsg.ApiVersionsRequest, 16), barriers: make(chan int, 16), closed: make(chan int, 16)}
	fb.wg.Add(1)
	go fb.accept()
	t.Cleanup(fb.close)

	deadline := time.Now().Add(testWait)
	for {
		pend, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "y"))})
		if err == nil {
			echo(recv(t, fb))
			if _, err = wait(t, pend); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful redial within %s: %v", testWait, err)
		}
		time.Sleep(5 * time.Millisecond) // the backoff is time-based: poll it
	}
}

func TestEvictionAndPruneCloseConnections(t *testing.T) {
	fb1, fb2 := newFakeBroker(t), newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb1.addr())
	res.set(2, fb2.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, MaxBrokers: 1}, res)

	pend := send(t, p, 1, 0, 12, "one")
	echo(recv(t, fb1))
	if _, err := wait(t, pend); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(p.m.conns.WithLabelValues("1")); v != 1 {
		t.Fatalf("connections to broker 1 = %v, want 1", v)
	}
	pend = send(t, p, 2, 0, 12, "two") // evicts broker 1's pool
	expectClosed(t, fb1, "evicted broker 1")
	echo(recv(t, fb2))
	if _, err := wait(t, pend); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return testutil.ToFloat64(p.m.conns.WithLabelValues("1")) == 0 }, "broker 1 gauge at 0")

	res.del(2)
	p.Prune()
	expectClosed(t, fb2, "pruned broker 2")
	if _, err := p.Send(context.Background(), 2, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "x"))}); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("send to a gone broker: err = %v, want ErrNotSent", err)
	}
}
