package upstream

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

func TestOutOfOrderMatching(t *testing.T) {
	for _, version := range []int16{4, 12} { // header v1 and v2 (flexible)
		t.Run(fmt.Sprintf("metadata-v%d", version), func(t *testing.T) {
			fb := newFakeBroker(t)
			res := &resolver{}
			res.set(1, fb.addr())
			p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)

			const n = 20
			pends := make([]Pending, n)
			for i := range pends {
				pends[i] = send(t, p, 1, 0, version, fmt.Sprintf("t%d", i))
			}
			hello := <-fb.hellos
			if hello.ClientSoftwareName != "kproxy" || hello.ClientSoftwareVersion != "0.1" || hello.Version != 3 {
				t.Fatalf("handshake = v%d %q %q, want v3 kproxy 0.1", hello.Version, hello.ClientSoftwareName, hello.ClientSoftwareVersion)
			}
			got := make([]*received, n)
			seen := map[int32]bool{}
			for i := range got {
				got[i] = recv(t, fb)
				if seen[got[i].corr] {
					t.Fatalf("correlation id %d reused while in flight", got[i].corr)
				}
				seen[got[i].corr] = true
				if got[i].clientID != "kproxy" {
					t.Fatalf("client id %q", got[i].clientID)
				}
			}
			for i := n - 1; i >= 0; i-- { // answer newest first
				echo(got[i])
			}
			for i, pend := range pends {
				body, err := wait(t, pend)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if topic := decodeTopic(t, version, body); topic != fmt.Sprintf("t%d", i) {
					t.Fatalf("request %d got the response for %s", i, topic)
				}
			}
		})
	}
}

// TestSameAffinityKeepsOrder: one affinity's requests reach the broker in
// the order Send was called, on one connection, whether each is written by
// its Send (small, nothing queued: writeInline) or queued for the writer
// (large, or behind another), on both broker shapes.
func TestSameAffinityKeepsOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inOrder bool
	}{{"unordered-shared", false}, {"in-order-on-demand", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fb := startFakeBroker(t, nil, tc.inOrder)
			res := &resolver{}
			res.set(1, fb.addr())
			p, _ := newTestPool(t, Config{ConnsPerBroker: 3}, res)

			const clients, perClient = 6, 50
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perClient {
						body := metadataReqPadded(12, fmt.Sprintf("%d/%d", c, i), i%3 == 2)
						if _, err := p.Send(context.Background(), 1, uint64(c), Request{Key: 3, Version: 12, Body: Raw(body)}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			next := make([]int, clients)
			connOf := make([]int, clients)
			for range clients * perClient {
				r := recv(t, fb)
				var c, i int
				if _, err := fmt.Sscanf(topicOf(r), "%d/%d", &c, &i); err != nil {
					t.Fatal(err)
				}
				if i != next[c] {
					t.Fatalf("client %d: request %d arrived before %d", c, i, next[c])
				}
				if i == 0 {
					connOf[c] = r.conn
				} else if r.conn != connOf[c] {
					t.Fatalf("client %d: requests split over connections %d and %d", c, connOf[c], r.conn)
				}
				next[c]++
				echo(r)
			}
		})
	}
}

// metadataReqPadded is metadataReq, made larger than inlineWriteBytes by
// three more long topic names when large.
func metadataReqPadded(version int16, topic string, large bool) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	names := []string{topic}
	if large {
		pad := strings.Repeat("x", inlineWriteBytes/3+1)
		names = append(names, pad, pad, pad)
	}
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	return req.AppendTo(nil)
}

// TestSendWritesSmallRequestItself: a small request on an idle connection
// is written before Send returns (by the Send, not the writer goroutine);
// a large one between them, which the writer writes, changes nothing.
func TestSendWritesSmallRequestItself(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{})
	ctx := context.Background()
	var c *conn
	for i, large := range []bool{false, false, true, false} {
		if c != nil {
			// The answer to the last request can come before the writer
			// goroutine that wrote it has given up the writer's place.
			waitFor(t, func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return !c.writing
			}, "the writer to finish the last write")
		}
		pend, err := p.Send(ctx, 1, 7, Request{Key: 3, Version: 12, Body: Raw(metadataReqPadded(12, fmt.Sprint(i), large))})
		if err != nil {
			t.Fatal(err)
		}
		r := pend.(*wireReq)
		if c != nil && r.c != c {
			t.Fatalf("request %d: a new connection for an idle affinity", i)
		}
		c = r.c
		r.c.mu.Lock()
		state := r.state
		r.c.mu.Unlock()
		if i > 0 && !large && state != stWritten && state != stDone { // the first waits for the dial
			t.Fatalf("request %d (small, idle connection): state %d when Send returned, want written", i, state)
		}
		echo(recv(t, fb))
		if _, err := pend.Wait(ctx); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		pend.Release()
	}
}

// TestKillFailsOnlyItsOwnRequests kills one connection while it holds one
// request that was written and, on a second connection still in its
// handshake, one that was not: the first fails ambiguously, the second with
// ErrNotSent, and a request on a third connection is unaffected.
func TestKillFailsOnlyItsOwnRequests(t *testing.T) {
	hold := make(chan struct{})
	fb := newFakeBrokerHolding(t, hold)
	res := &resolver{}
	res.set(1, fb.addr())
	p, reg := newTestPool(t, Config{ConnsPerBroker: 3}, res)

	// Open connections 0 and 1 (affinities 0 and 1) with one request each.
	// The first Send waits for the first handshake.
	go func() { hold <- struct{}{} }()
	written := send(t, p, 1, 0, 12, "written")
	other := send(t, p, 1, 1, 12, "other")
	hold <- struct{}{}
	rw, ro := recv(t, fb), recv(t, fb)
	if topicOf(rw) != "written" {
		rw, ro = ro, rw
	}
	// Affinity 2 opens a connection whose handshake the broker holds.
	queued := send(t, p, 1, 2, 12, "queued")
	waitFor(t, func() bool { fb.mu.Lock(); defer fb.mu.Unlock(); return len(fb.conns) == 3 }, "third connection accepted")

	fb.kill(rw.conn)
	if _, err := wait(t, written); err == nil || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("written request: err = %v, want an ambiguous error", err)
	}
	fb.kill(2)
	close(hold)
	if _, err := wait(t, queued); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("queued request: err = %v, want ErrNotSent", err)
	}
	echo(ro)
	body, err := wait(t, other)
	if err != nil || decodeTopic(t, 12, body) != "other" {
		t.Fatalf("request on a healthy connection: %v", err)
	}
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindRead)); v < 1 {
		t.Fatalf("read errors = %v, want >= 1", v)
	}
	_ = reg

	// The killed slot redials on the next send.
	again := send(t, p, 1, 0, 12, "again")
	echo(recv(t, fb))
	if _, err := wait(t, again); err != nil {
		t.Fatalf("after redial: %v", err)
	}
}

func TestInFlightBound(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, MaxInFlightPerConn: 2}, res)

	a, b := send(t, p, 1, 0, 12, "a"), send(t, p, 1, 0, 12, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Send(ctx, 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "c"))}); !errors.Is(err, retry.ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("send beyond the bound: err = %v, want ErrNotSent after the deadline", err)
	}
	if v := testutil.ToFloat64(p.m.inflight.WithLabelValues("1")); v != 2 {
		t.Fatalf("inflight gauge = %v, want 2", v)
	}
	// A blocked Send proceeds once a response frees a slot.
	done := make(chan error, 1)
	go func() {
		_, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "d"))})
		done <- err
	}()
	ra := recv(t, fb)
	rb := recv(t, fb)
	select {
	case err := <-done:
		t.Fatalf("send returned (%v) while the connection was full", err)
	default:
	}
	echo(ra)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	echo(rb)
	echo(recv(t, fb))
	for _, pend := range []Pending{a, b} {
		if _, err := wait(t, pend); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return testutil.ToFloat64(p.m.inflight.WithLabelValues("1")) == 0 }, "inflight gauge back to 0")
}

func TestAcksZeroProduce(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	for _, version := range []int16{2, 7, 9, 11} {
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		req.Acks = 0
		req.TransactionID = kmsg.StringPtr("txn")
		pend, err := p.Send(context.Background(), 1, 0, Request{Key: 0, Version: version, Body: Raw(req.AppendTo(nil)), Hold: Hold{NoResponse: true}})
		if err != nil {
			t.Fatal(err)
		}
		body, err := wait(t, pend)
		if err != nil || body != nil {
			t.Fatalf("v%d acks=0: body %v err %v, want nil, nil", version, body, err)
		}
		if r := recv(t, fb); r.key != 0 || r.version != version {
			t.Fatalf("broker got key %d v%d", r.key, r.version)
		}
	}
	// The connection still matches the next response correctly.
	pend := send(t, p, 1, 0, 12, "after")
	echo(recv(t, fb))
	if body, err := wait(t, pend); err != nil || decodeTopic(t, 12, body) != "after" {
		t.Fatalf("after acks=0: %v", err)
	}
}

func TestWaitCancelDiscardsLateResponse(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)

	pend := send(t, p, 1, 0, 12, "slow")
	r := recv(t, fb)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pend.Wait(ctx); err == nil || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("cancelled wait on a written request: err = %v, want ambiguous", err)
	}
	echo(r) // late: discarded by the reader
	waitFor(t, func() bool { return testutil.ToFloat64(p.m.inflight.WithLabelValues("1")) == 0 }, "late response freed its slot")
	next := send(t, p, 1, 0, 12, "next")
	echo(recv(t, fb))
	if body, err := wait(t, next); err != nil || decodeTopic(t, 12, body) != "next" {
		t.Fatalf("after a discarded response: %v", err)
	}
}

func TestWaitCancelWithdrawsQueuedRequest(t *testing.T) {
	hold := make(chan struct{})
	fb := newFakeBrokerHolding(t, hold)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	learnShape(t, p, fb, hold)

	pend := send(t, p, 1, 0, 12, "withdrawn") // queued behind the held handshake
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pend.Wait(ctx); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("cancelled wait on a queued request: err = %v, want ErrNotSent", err)
	}
	close(hold)
	kept := send(t, p, 1, 0, 12, "kept")
	r := recv(t, fb)
	if topicOf(r) != "kept" {
		t.Fatalf("broker got %q: the withdrawn request was written", topicOf(r))
	}
	echo(r)
	if _, err := wait(t, kept); err != nil {
		t.Fatal(err)
	}
}

func TestReadTimeoutKillsHungConnection(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, ReadTimeout: 100 * time.Millisecond}, res)
	pend := send(t, p, 1, 0, 12, "ignored")
	recv(t, fb) // never answered
	if _, err := wait(t, pend); err == nil || errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("hung broker: err = %v, want ambiguous timeout", err)
	}
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindTimeout)); v != 1 {
		t.Fatalf("timeout errors = %v, want 1", v)
	}
}

func TestCloseFailsInFlightAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	res.set(2, fb.addr())
	p := NewPool(Config{Resolve: res.resolve, ConnsPerBroker: 2})
	pends := []Pending{send(t, p, 1, 0, 12, "a"), send(t, p, 1, 1, 12, "b"), send(t, p, 2, 0, 4, "c")}
	for range pends {
		recv(t, fb)
	}
	p.Close()
	for i, pend := range pends {
		if _, err := wait(t, pend); err == nil {
			t.Fatalf("request %d succeeded after Close", i)
		}
	}
	if _, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, "late"))}); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("send after Close: err = %v, want ErrNotSent", err)
	}
	p.Close() // idempotent
	fb.close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines back to %d", before))
}

// TestLongPollOutlivesReadTimeout: a fetch's own max wait extends how long
// its response may take, so long polls do not kill the connection.
func TestLongPollOutlivesReadTimeout(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, ReadTimeout: 50 * time.Millisecond}, res)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis = 12, 2000
	pend, err := p.Send(context.Background(), 1, 0, Request{Key: 1, Version: 12, Body: Raw(req.AppendTo(nil)), Hold: Hold{Long: true, Allowance: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	r := recv(t, fb)
	time.Sleep(200 * time.Millisecond) // the broker holds the fetch past ReadTimeout, within its max wait
	resp := kmsg.NewPtrFetchResponse()
	r.reply(resp)
	if _, err := wait(t, pend); err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindTimeout)); v != 0 {
		t.Fatalf("timeout errors = %v, want 0", v)
	}
}

// TestReleaseIsSafe: Release before the response arrives leaves the
// response intact, and a second Release does not put the frame back twice.
func TestReleaseIsSafe(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	pend := send(t, p, 1, 0, 12, "early")
	pend.Release() // not answered yet: must not hand out the frame
	echo(recv(t, fb))
	body, err := wait(t, pend)
	if err != nil {
		t.Fatal(err)
	}
	if topic := decodeTopic(t, 12, body); topic != "early" {
		t.Fatalf("topic %q after an early Release", topic)
	}
	size := cap(*pend.(*wireReq).resp)
	pend.Release()
	pend.Release()
	// Put twice, the frame would come out of the pool twice and two
	// responses would share it.
	if a, b := p.bufs.Get(size), p.bufs.Get(size); a == b {
		t.Fatal("a frame released twice came out of the pool twice")
	}
	again := send(t, p, 1, 0, 12, "next")
	echo(recv(t, fb))
	body, err = wait(t, again)
	if err != nil || decodeTopic(t, 12, body) != "next" {
		t.Fatalf("after Release: %q %v", body, err)
	}
}

// TestClientIDInHeader: a request carries the client id it is sent with,
// in both header versions; without one it carries the pool's.
func TestClientIDInHeader(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	app := "orders-service"
	for _, tc := range []struct {
		version int16
		id      *string
		want    string
	}{
		{4, &app, app}, {12, &app, app}, {12, nil, "kproxy"},
	} {
		pend, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: tc.version, ClientID: tc.id, Body: Raw(metadataReq(tc.version, "t"))})
		if err != nil {
			t.Fatal(err)
		}
		got := recv(t, fb)
		if got.clientID != tc.want {
			t.Fatalf("v%d: broker got client id %q, want %q", tc.version, got.clientID, tc.want)
		}
		echo(got)
		if _, err := wait(t, pend); err != nil {
			t.Fatal(err)
		}
	}
}
