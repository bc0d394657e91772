package upstream

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

func sendReq(t *testing.T, p *Pool, aff uint64, req kmsg.Request) Pending {
	t.Helper()
	pend, err := p.Send(context.Background(), 1, aff, Request{Key: req.Key(), Version: req.GetVersion(), Body: Raw(req.AppendTo(nil)), Hold: testHold(req)})
	if err != nil {
		t.Fatalf("send %T for affinity %d: %v", req, aff, err)
	}
	return pend
}

// testHold is the Hold the proxy's apis package passes for the requests
// these tests send.
func testHold(req kmsg.Request) Hold {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		w := time.Duration(r.MaxWaitMillis) * time.Millisecond
		return Hold{Long: w > 0, Allowance: w}
	case *kmsg.JoinGroupRequest:
		return Hold{Long: true, Allowance: time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond}
	case *kmsg.SyncGroupRequest:
		return Hold{Long: true, Allowance: 5 * time.Minute}
	case *kmsg.ProduceRequest:
		return Hold{Allowance: time.Duration(r.TimeoutMillis) * time.Millisecond, NoResponse: r.Acks == 0}
	}
	return Hold{}
}

func longPoll(maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, maxWait, 1, 1<<20
	return req
}

func produce() *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	return req
}

func joinGroup(rebalanceMillis int32) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6, "g", 10000, rebalanceMillis
	req.ProtocolType = "consumer"
	return req
}

// recvKey receives the next request and checks its key.
func recvKey(t *testing.T, fb *fakeBroker, key int16) *received {
	t.Helper()
	r := recv(t, fb)
	if r.key != key {
		t.Fatalf("broker got key %d, want %d", r.key, key)
	}
	return r
}

func mustWait(t *testing.T, pend Pending, what string) {
	t.Helper()
	if _, err := wait(t, pend); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func dedicatedConns(p *Pool) float64 { return testutil.ToFloat64(p.m.dedicated.WithLabelValues("1")) }

// TestInOrderBrokerLongPollDoesNotBlockOthers: against a broker answering
// one request at a time per connection, a held long poll or JoinGroup of one
// affinity delays neither another affinity's produce (on the one shared
// connection) nor its JoinGroup, and an affinity's held requests reuse its
// dedicated connection.
func TestInOrderBrokerLongPollDoesNotBlockOthers(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{ConnsPerBroker: 1})

	fetch := sendReq(t, p, 1, longPoll(60000))
	rf := recvKey(t, fb, keyFetch) // held
	join2 := sendReq(t, p, 2, joinGroup(60000))
	rj2 := recvKey(t, fb, keyJoinGroup) // held
	join3 := sendReq(t, p, 3, joinGroup(60000))
	rj3 := recvKey(t, fb, keyJoinGroup) // held
	if rf.conn == rj2.conn || rj2.conn == rj3.conn || rf.conn == rj3.conn {
		t.Fatalf("held requests share connections: fetch on %d, joins on %d and %d", rf.conn, rj2.conn, rj3.conn)
	}
	for i := range 3 {
		prod := sendReq(t, p, uint64(i+1), produce())
		rp := recvKey(t, fb, keyProduce)
		if rp.conn == rf.conn || rp.conn == rj2.conn || rp.conn == rj3.conn {
			t.Fatalf("produce %d went to a dedicated connection (%d)", i, rp.conn)
		}
		rp.replyEmpty()
		mustWait(t, prod, fmt.Sprintf("produce %d while others' requests are held", i))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 4, "g"
	beat := sendReq(t, p, 2, hb)
	recvKey(t, fb, int16(kmsg.Heartbeat)).replyEmpty()
	mustWait(t, beat, "heartbeat while JoinGroups are held")

	if got := dedicatedConns(p); got != 3 {
		t.Fatalf("dedicated connections = %v, want 3", got)
	}
	rj3.replyEmpty()
	rj2.replyEmpty()
	rf.replyEmpty()
	for _, pend := range []Pending{fetch, join2, join3} {
		mustWait(t, pend, "held request")
	}
	// The same affinity's next long poll and SyncGroup reuse its connection.
	again := sendReq(t, p, 1, longPoll(60000))
	ra := recvKey(t, fb, keyFetch)
	if ra.conn != rf.conn {
		t.Fatalf("affinity 1's second long poll on connection %d, first on %d", ra.conn, rf.conn)
	}
	ra.replyEmpty()
	mustWait(t, again, "second long poll")
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Version, sg.Group = 4, "g"
	sync2 := sendReq(t, p, 2, sg)
	if rs := recvKey(t, fb, keySyncGroup); rs.conn != rj2.conn {
		t.Fatalf("affinity 2's SyncGroup on connection %d, its JoinGroup on %d", rs.conn, rj2.conn)
	} else {
		rs.replyEmpty()
	}
	mustWait(t, sync2, "SyncGroup")
	// A fetch that does not wait is not held: it shares.
	quick := sendReq(t, p, 3, longPoll(0))
	if rq := recvKey(t, fb, keyFetch); rq.conn == rj3.conn {
		t.Fatal("a fetch with MaxWait 0 went to a dedicated connection")
	} else {
		rq.replyEmpty()
	}
	mustWait(t, quick, "fetch without wait")
}

// TestUnorderedBrokerMultiplexes: a broker advertising layout.UnorderedResponsesFeature gets
// every request on the shared connection, held ones included.
func TestUnorderedBrokerMultiplexes(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)

	pends := []Pending{sendReq(t, p, 1, longPoll(60000)), sendReq(t, p, 2, joinGroup(60000)), sendReq(t, p, 3, produce())}
	var got []*received
	for range pends {
		got = append(got, recv(t, fb))
	}
	for i, r := range got {
		if r.conn != 0 {
			t.Fatalf("request %d (key %d) on connection %d, want all on 0", i, r.key, r.conn)
		}
	}
	for i := len(got) - 1; i >= 0; i-- {
		got[i].replyEmpty()
	}
	for _, pend := range pends {
		mustWait(t, pend, "multiplexed request")
	}
	if n := dedicatedConns(p); n != 0 {
		t.Fatalf("dedicated connections = %v, want 0", n)
	}
}

// TestDedicatedConnsBounded: at MaxBlockingConnsPerBroker busy dedicated
// connections a held request waits (and fails with ErrNotSent when its
// context ends); once one is idle, it is closed to make room.
func TestDedicatedConnsBounded(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{ConnsPerBroker: 1, MaxBlockingConnsPerBroker: 2, BlockingConnIdle: time.Hour})

	f1 := sendReq(t, p, 1, longPoll(60000))
	r1 := recvKey(t, fb, keyFetch)
	f2 := sendReq(t, p, 2, longPoll(60000))
	r2 := recvKey(t, fb, keyFetch)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Send(ctx, 1, 3, Request{Key: keyFetch, Version: 12, Body: Raw(longPoll(60000).AppendTo(nil)), Hold: Hold{Long: true, Allowance: time.Minute}}); !errors.Is(err, retry.ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held request beyond the bound: err = %v, want ErrNotSent after the deadline", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Send(context.Background(), 1, 3, Request{Key: keyFetch, Version: 12, Body: Raw(longPoll(60000).AppendTo(nil)), Hold: Hold{Long: true, Allowance: time.Minute}})
		done <- err
	}()
	r1.replyEmpty() // affinity 1's connection becomes idle: reclaimed for 3
	mustWait(t, f1, "first long poll")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("send after room was made: %v", err)
		}
	case <-time.After(testWait):
		t.Fatalf("send still waiting %s after a dedicated connection became idle", testWait)
	}
	expectClosed(t, fb, "reclaimed idle dedicated connection")
	r3 := recvKey(t, fb, keyFetch)
	if r3.conn == r1.conn || r3.conn == r2.conn {
		t.Fatalf("third affinity's fetch on connection %d", r3.conn)
	}
	if n := dedicatedConns(p); n != 2 {
		t.Fatalf("dedicated connections = %v, want 2", n)
	}
	r2.replyEmpty()
	r3.replyEmpty()
	mustWait(t, f2, "second long poll")
}

// TestDedicatedConnsCloseWhenIdle: a dedicated connection stays open while a
// request is held on it beyond BlockingConnIdle and closes once idle.
func TestDedicatedConnsCloseWhenIdle(t *testing.T) {
	fb := newInOrderFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	const idle = 50 * time.Millisecond
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, BlockingConnIdle: idle}, res)

	fetch := sendReq(t, p, 1, longPoll(60000))
	r := recvKey(t, fb, keyFetch)
	time.Sleep(4 * idle) // held beyond the idle time: must stay open
	select {
	case idx := <-fb.closed:
		t.Fatalf("connection %d closed while a request was held on it", idx)
	default:
	}
	r.replyEmpty()
	mustWait(t, fetch, "held long poll")
	start := time.Now()
	expectClosed(t, fb, "idle dedicated connection")
	if took := time.Since(start); took > testWait/2 {
		t.Fatalf("idle connection closed after %v, BlockingConnIdle %v", took, idle)
	}
	waitFor(t, func() bool { return dedicatedConns(p) == 0 }, "dedicated gauge back to 0")
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindTimeout)); v != 0 {
		t.Fatalf("timeout errors = %v", v)
	}
	// The next held request dials a new one.
	again := sendReq(t, p, 1, longPoll(60000))
	recvKey(t, fb, keyFetch).replyEmpty()
	mustWait(t, again, "long poll after idle close")
}

// TestInOrderHeldRequestsOutliveReadTimeout: on an in-order connection a
// request's allowance starts once the requests ahead of it may be answered,
// and a JoinGroup may take its rebalance timeout.
func TestInOrderHeldRequestsOutliveReadTimeout(t *testing.T) {
	fb, p, _ := inOrderPool(t, Config{ConnsPerBroker: 1, ReadTimeout: 50 * time.Millisecond})

	join := sendReq(t, p, 1, joinGroup(2000))
	fetch := sendReq(t, p, 1, longPoll(10)) // behind the join on its connection
	rj := recvKey(t, fb, keyJoinGroup)
	time.Sleep(300 * time.Millisecond) // held past ReadTimeout and the fetch's own wait
	rj.replyEmpty()
	recvKey(t, fb, keyFetch).replyEmpty()
	mustWait(t, join, "held JoinGroup")
	mustWait(t, fetch, "fetch queued behind it")
	if v := testutil.ToFloat64(p.m.errors.WithLabelValues("1", kindTimeout)); v != 0 {
		t.Fatalf("timeout errors = %v, want 0", v)
	}
}

// TestCloseWithDedicatedConnsLeaksNothing: Close fails held requests on
// dedicated connections and stops every goroutine.
func TestCloseWithDedicatedConnsLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()
	fb := newInOrderFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p := NewPool(Config{Resolve: res.resolve, ConnsPerBroker: 1, BlockingConnIdle: 10 * time.Millisecond})
	pends := []Pending{sendReq(t, p, 1, longPoll(60000)), sendReq(t, p, 2, joinGroup(60000))}
	for range pends {
		recv(t, fb)
	}
	// A dedicated connection that is idle but not yet closed, and one
	// closing as idle concurrently with Close.
	idle := sendReq(t, p, 3, longPoll(60000))
	recvKey(t, fb, keyFetch).replyEmpty()
	mustWait(t, idle, "long poll")
	p.Close()
	for i, pend := range pends {
		if _, err := wait(t, pend); err == nil {
			t.Fatalf("held request %d succeeded after Close", i)
		}
	}
	if _, err := p.Send(context.Background(), 1, 1, Request{Key: keyFetch, Version: 12, Body: Raw(longPoll(60000).AppendTo(nil)), Hold: Hold{Long: true, Allowance: time.Minute}}); !errors.Is(err, retry.ErrNotSent) {
		t.Fatalf("send after Close: err = %v, want ErrNotSent", err)
	}
	fb.close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines back to %d", before))
}
