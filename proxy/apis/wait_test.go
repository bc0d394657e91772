package apis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchAdoptsParkedLongPoll: a fetch that answers early parks the idle
// brokers' long polls; the connection's next fetch for the same partitions
// at the same offsets waits for them instead of sending new ones (which
// would pile up, each holding an upstream slot for MaxWait). Another
// connection, or other offsets, get polls of their own.
func TestFetchAdoptsParkedLongPoll(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	f.on(3, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	req := partAPIs[1].build(11, spread).(*kmsg.FetchRequest)
	req.MinBytes, req.MaxWaitMillis = 1, 60_000
	moved := partAPIs[1].build(11, spread).(*kmsg.FetchRequest)
	moved.MinBytes, moved.MaxWaitMillis = 1, 60_000
	for ti := range moved.Topics {
		for pi := range moved.Topics[ti].Partitions {
			moved.Topics[ti].Partitions[pi].FetchOffset++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn1, cancel1 := context.WithCancel(ctx)
	conn2, cancel2 := context.WithCancel(ctx)
	for _, step := range []struct {
		name       string
		ctx        context.Context
		conn       uint64
		req        *kmsg.FetchRequest
		wantToIdle int // fetches brokers 2 and 3 have each got after the step
	}{
		{"first fetch", conn1, 1, req, 1},
		{"same fetch, same connection", conn1, 1, req, 1},
		{"again", conn1, 1, req, 1},
		{"same fetch, other connection", conn2, 2, req, 2},
		{"other offsets, same connection", conn1, 1, moved, 3},
	} {
		c := d.Begin(step.ctx, step.conn, Header{Key: step.req.Key(), Version: step.req.Version}, step.req.AppendTo(nil))
		reply, err := c.Finish(step.ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := partAPIs[1].resp(decodeReply(t, step.req, replyBytes(reply)).(*kmsg.FetchResponse))
		if len(got) != 3 {
			t.Fatalf("%s: answered %v, want broker 1's three partitions", step.name, got)
		}
		for _, b := range []int32{2, 3} {
			if n := f.count(b, kmsg.Fetch); n != step.wantToIdle {
				t.Fatalf("%s: broker %d got %d fetches, want %d", step.name, b, n, step.wantToIdle)
			}
		}
	}
	// Every poll left behind ends with its connection: two pairs on conn1
	// (the first, replaced in the registry by the second, still ends), one
	// pair on conn2.
	cancel1()
	cancel2()
	for i := range 6 {
		select {
		case e := <-f.idleEnd:
			if !errors.Is(e, context.Canceled) {
				t.Fatalf("idle wait ended with %v, want its connection's cancellation", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 6 idle waits ended with their connections", i)
		}
	}
}

// gatedFetch is a dispatcher whose brokers 2 and 3 answer fetches only
// once gate is closed, and a fetch over all three brokers that broker 1's
// data answers early (MinBytes 1).
func gatedFetch(t *testing.T) (*Dispatcher, *fakeSender, *kmsg.FetchRequest, chan struct{}) {
	t.Helper()
	d, f, _ := newTestDispatcher(t)
	gate := make(chan struct{})
	for _, b := range []int32{2, 3} {
		f.on(b, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{gate: gate} })
	}
	req := partAPIs[1].build(11, spread).(*kmsg.FetchRequest)
	req.MinBytes, req.MaxWaitMillis = 1, 60_000
	return d, f, req, gate
}

// TestUnadoptedLongPollReleasesItsAnswer: a parked long poll whose broker
// answers before any fetch adopts it hands its answer's frame back, since
// nobody will read it.
func TestUnadoptedLongPollReleasesItsAnswer(t *testing.T) {
	d, f, req, gate := gatedFetch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := d.Begin(ctx, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil)).Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := partAPIs[1].resp(decodeReply(t, req, replyBytes(reply)).(*kmsg.FetchResponse)); len(got) != 3 {
		t.Fatalf("answered %v, want broker 1's three partitions only", got)
	}
	drain := func() {
		for {
			select {
			case <-f.freed:
			default:
				return
			}
		}
	}
	drain() // broker 1's answer, merged
	close(gate)
	freed := map[int32]bool{}
	for len(freed) < 2 {
		select {
		case b := <-f.freed:
			freed[b] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("answers released after the gate opened: %v, want brokers 2 and 3", freed)
		}
	}
	if !freed[2] || !freed[3] {
		t.Fatalf("released %v, want brokers 2 and 3", freed)
	}
}

// TestParkedAnswerServesNextFetch: brokers left behind by an early answer
// that answer before the connection's next fetch keep their answers for
// it: the next fetch for the same offsets gets their partitions without
// asking those brokers again (dropping the answers made every broker read
// each record set twice under load).
func TestParkedAnswerServesNextFetch(t *testing.T) {
	d, f, req, gate := gatedFetch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, closeConn := context.WithCancel(ctx)
	defer closeConn()
	fetch := func(step string, want int) {
		t.Helper()
		reply, err := d.Begin(conn, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil)).Finish(conn)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := partAPIs[1].resp(decodeReply(t, req, replyBytes(reply)).(*kmsg.FetchResponse)); len(got) != want {
			t.Fatalf("%s: answered %v, want %d partitions", step, got, want)
		}
		reply.Release()
	}
	fetch("first fetch: broker 1 answers early", 3)
	close(gate)
	for range 2 { // brokers 2 and 3 answer while nobody asks
		select {
		case <-f.answered:
		case <-time.After(5 * time.Second):
			t.Fatal("brokers 2 and 3 did not answer after the gate opened")
		}
	}
	fetch("next fetch, same offsets: the kept answers serve it", 9)
	for _, b := range []int32{2, 3} {
		if n := f.count(b, kmsg.Fetch); n != 1 {
			t.Fatalf("broker %d got %d fetches, want 1 (its kept answer served the second)", b, n)
		}
	}
}

// TestCloseJoinsLongPolls: the goroutines that wait for long polls an
// early answer left behind are joined by Close once their connection ends.
func TestCloseJoinsLongPolls(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	f.on(3, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	req := partAPIs[1].build(11, spread).(*kmsg.FetchRequest)
	req.MinBytes, req.MaxWaitMillis = 1, 60_000
	conn, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := d.Begin(conn, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil)).Finish(conn); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		d.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while two long polls still waited")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the connection ended")
	}
	if n := len(f.idleEnd); n != 2 {
		t.Fatalf("%d idle waits ended, want 2", n)
	}
}
