package split

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/routing"
)

// tagged is the toy adapter whose sub-requests carry the request's tag
// after each partition, so that a broker tells requests apart.
type tagged struct {
	toy
	tag byte
}

func (a *tagged) Encode(dst []byte, idx []int32, _ int) []byte {
	for _, i := range idx {
		dst = append(dst, a.parts[i], a.tag)
	}
	return dst
}

// lineSender records the tags each broker receives, in Send order (the
// order an ordered connection delivers them in). Broker 1 (the old
// leader) answers only when the test says, with the code it says; every
// other broker accepts at once.
type lineSender struct {
	mu   sync.Mutex
	got  map[int32][]byte
	held []*heldAnswer
	sent chan int32 // each Send's broker
}

type heldAnswer struct {
	tag   byte
	parts []byte
	code  chan int16
}

func (h *heldAnswer) Wait(ctx context.Context) ([]byte, error) {
	select {
	case c := <-h.code:
		var b []byte
		for _, p := range h.parts {
			b = append(b, p, byte(int8(c)))
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *heldAnswer) Release() {}

func (f *lineSender) Send(_ context.Context, broker int32, _ uint64, req upstream.Request) (upstream.Pending, error) {
	body := req.Body.AppendBody(nil)
	h := &heldAnswer{tag: body[1], code: make(chan int16, 1)}
	for k := 0; k+1 < len(body); k += 2 {
		h.parts = append(h.parts, body[k])
	}
	f.mu.Lock()
	f.got[broker] = append(f.got[broker], h.tag)
	if broker == 1 {
		f.held = append(f.held, h)
	} else {
		h.code <- 0
	}
	f.mu.Unlock()
	f.sent <- broker
	return h, nil
}

// answer has broker 1 answer request tag's attempt with code.
func (f *lineSender) answer(t *testing.T, tag byte, code int16) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, h := range f.held {
		if h.tag == tag {
			f.held = append(f.held[:k], f.held[k+1:]...)
			h.code <- code
			return
		}
	}
	t.Fatalf("broker 1 holds no attempt of request %c", tag)
}

func (f *lineSender) received(broker int32) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return string(f.got[broker])
}

// testConn is the client connection: too large an id to box without
// allocating, as real ones are.
const testConn = 1<<40 + 7

// orderRig is one client connection producing to partition 0 of "t",
// whose leader is broker 1 until the test moves it to broker 2.
type orderRig struct {
	t     *testing.T
	rt    *routing.Table
	env   *Env
	snd   *lineSender
	ctx   context.Context
	close context.CancelFunc
}

func newOrderRig(t *testing.T) *orderRig {
	rt := routing.NewTable()
	for id := int32(1); id <= 3; id++ {
		rt.SetBroker(routing.Broker{ID: id, Addr: fmt.Sprintf("b%d:9092", id)})
	}
	rt.SetTopic(routing.Topic{Name: "t", Partitions: 1})
	rt.SetOwner("t", 0, 1)
	snd := &lineSender{got: map[int32][]byte{}, sent: make(chan int32, 64)}
	env := &Env{
		Routes: rt, Sender: snd, Log: slog.New(slog.DiscardHandler), Now: time.Now, Metrics: noMetrics{},
		Backoff: func(attempt int, deadline time.Time) (time.Duration, bool) {
			return 0, attempt < 10 && time.Now().Before(deadline)
		},
		Bufs: &kwire.BufPool{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r := &orderRig{t: t, rt: rt, env: env, snd: snd, ctx: ctx, close: cancel}
	t.Cleanup(func() {
		cancel()
		env.Close()
	})
	return r
}

// produce begins request tag (one item, partition 0) on the connection:
// its first attempt, in read order. It returns the request's outcome.
func (r *orderRig) produce(tag byte, budget time.Duration) <-chan []byte {
	a := &tagged{toy: toy{parts: []byte{0}, answers: make([]int16, 1)}, tag: tag}
	a.s.Init(r.env, a, Request{Key: 0, Conn: testConn, Deadline: time.Now().Add(budget), RouteBy: ByPartitionWrite, Ordered: true})
	a.s.Reserve(1)
	a.s.Add("t", [16]byte{}, 0, 0, 0)
	a.s.Dispatch(r.ctx, nil)
	out := make(chan []byte, 1)
	go func() {
		ans, err := a.s.Finish(r.ctx)
		if err != nil {
			out <- nil
			return
		}
		out <- ans.Body
	}()
	return out
}

// sentTo waits for the next Send and says where it went.
func (r *orderRig) sentTo() int32 {
	r.t.Helper()
	select {
	case b := <-r.snd.sent:
		return b
	case <-time.After(5 * time.Second):
		r.t.Fatal("no request sent within 5s")
		return -1
	}
}

func (r *orderRig) outcome(tag byte, ch <-chan []byte) int16 {
	r.t.Helper()
	select {
	case b := <-ch:
		if len(b) != 2 {
			r.t.Fatalf("request %c: answer %v, want one code", tag, b)
		}
		return int16(int8(b[1]))
	case <-time.After(5 * time.Second):
		r.t.Fatalf("request %c unanswered within 5s", tag)
		return 0
	}
}

// count says how many lines the connection has, and how many of their
// items wait for their turn.
func (r *orderRig) count() (lines, behind int) {
	cl, ok := r.env.lines.lookup(testConn)
	if !ok {
		return 0, 0
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, ln := range cl.lines {
		for _, e := range ln.ents {
			if e.behind {
				behind++
			}
		}
	}
	return len(cl.lines), behind
}

func (r *orderRig) behind() int { _, n := r.count(); return n }
func (r *orderRig) lines() int  { n, _ := r.count(); return n }

// wantWritten checks that requests reqs, tagged as want says, were all
// written, that the new leader received them in that order, and that no
// line is left.
func (r *orderRig) wantWritten(want string, reqs ...<-chan []byte) {
	r.t.Helper()
	for k, ch := range reqs {
		if code := r.outcome(want[k], ch); code != 0 {
			r.t.Fatalf("request %c answered %d, want written", want[k], code)
		}
	}
	if got := r.snd.received(2); got != want {
		r.t.Fatalf("the new leader received %q, want %q: the order they were read in", got, want)
	}
	if n := r.lines(); n != 0 {
		r.t.Fatalf("%d lines left once all are answered, want 0", n)
	}
}

// movedUnderA begins request A with budget and moves the leader to
// broker 2 while A is in flight to broker 1.
func (r *orderRig) movedUnderA(budget time.Duration) <-chan []byte {
	r.t.Helper()
	a := r.produce('A', budget)
	if got := r.sentTo(); got != 1 {
		r.t.Fatalf("A went to broker %d, want 1", got)
	}
	r.rt.SetOwner("t", 0, 2)
	return a
}

// waitBehind waits until n items wait for their turn, or until broker 2
// got a request (the order is then already lost).
func (r *orderRig) waitBehind(n int) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.behind() < n && r.snd.received(2) == "" {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d items wait for their turn after 5s, want %d", r.behind(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOrderAcrossLeaderMove: two pipelined produces of one connection to
// one partition reach the partition's new leader in the order they were
// read, whichever of them is refused first and whether the later one is
// routed to the new leader at once.
func TestOrderAcrossLeaderMove(t *testing.T) {
	notLeader := kerr.NotLeaderForPartition.Code
	cases := []struct {
		name string
		run  func(r *orderRig) (a, b <-chan []byte)
	}{
		{"later-routed-to-new-leader-while-earlier-in-flight", func(r *orderRig) (<-chan []byte, <-chan []byte) {
			a := r.movedUnderA(time.Minute)
			b := r.produce('B', time.Minute)
			r.snd.answer(t, 'A', notLeader)
			return a, b
		}},
		{"later-refused-first", func(r *orderRig) (<-chan []byte, <-chan []byte) {
			a := r.produce('A', time.Minute)
			b := r.produce('B', time.Minute)
			for range 2 {
				if got := r.sentTo(); got != 1 {
					t.Fatalf("a first attempt went to broker %d, want 1", got)
				}
			}
			r.rt.SetOwner("t", 0, 2)
			r.snd.answer(t, 'B', notLeader) // B's refusal is taken first
			r.waitBehind(1)
			r.snd.answer(t, 'A', notLeader)
			return a, b
		}},
		{"later-out-of-order-while-earlier-unanswered", func(r *orderRig) (<-chan []byte, <-chan []byte) {
			// B comes back OUT_OF_ORDER_SEQUENCE_NUMBER while A, sent
			// before it, is unanswered: B is retried behind A, not
			// answered out of order.
			a := r.produce('A', time.Minute)
			b := r.produce('B', time.Minute)
			r.sentTo()
			r.sentTo()
			r.rt.SetOwner("t", 0, 2)
			r.snd.answer(t, 'B', kerr.OutOfOrderSequenceNumber.Code)
			r.waitBehind(1)
			r.snd.answer(t, 'A', notLeader)
			return a, b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newOrderRig(t)
			a, b := tc.run(r)
			r.wantWritten("AB", a, b)
		})
	}
}

// TestOrderBehindTimesOut: an item waiting behind one that stays in
// flight is answered REQUEST_TIMED_OUT at its request's deadline, unsent.
// The client resends it, so the one that waited behind both is answered
// NOT_LEADER_OR_FOLLOWER unsent, not written before the resend; the
// client's later requests are written in order.
func TestOrderBehindTimesOut(t *testing.T) {
	r := newOrderRig(t)
	a := r.movedUnderA(time.Minute)
	b := r.produce('B', 50*time.Millisecond)
	c := r.produce('C', time.Minute)
	r.wantUnsent(kerr.RequestTimedOut.Code, "B", b)
	r.wantUnsent(kerr.NotLeaderForPartition.Code, "C", c)
	r.snd.answer(t, 'A', kerr.NotLeaderForPartition.Code)
	b2 := r.produce('b', time.Minute) // the client's resends
	c2 := r.produce('c', time.Minute)
	r.wantWritten("Abc", a, b2, c2)
}

// TestOrderGivenUp: when the proxy answers an item unwritten because its
// retries ran out, the items behind it in its line are answered
// NOT_LEADER_OR_FOLLOWER unsent, so that the client's resend comes first.
func TestOrderGivenUp(t *testing.T) {
	r := newOrderRig(t)
	a := r.movedUnderA(-time.Second) // no retry left
	b := r.produce('B', time.Minute)
	r.waitBehind(1)
	r.snd.answer(t, 'A', kerr.NotLeaderForPartition.Code)
	r.wantUnsent(kerr.NotLeaderForPartition.Code, "AB", a, b)
	a2 := r.produce('a', time.Minute)
	b2 := r.produce('b', time.Minute)
	r.wantWritten("ab", a2, b2)
}

// wantUnsent checks that requests reqs, tagged as tags says, were
// answered code and that the new leader received none of them.
func (r *orderRig) wantUnsent(code int16, tags string, reqs ...<-chan []byte) {
	r.t.Helper()
	for k, ch := range reqs {
		if got := r.outcome(tags[k], ch); got != code {
			r.t.Fatalf("request %c answered %d, want %d", tags[k], got, code)
		}
	}
	if got := r.snd.received(2); got != "" {
		r.t.Fatalf("the new leader received %q, want nothing yet", got)
	}
}

// TestOrderConnectionClose: when the connection ends, requests waiting
// in line return and give their places back, and the connection's lines
// go.
func TestOrderConnectionClose(t *testing.T) {
	r := newOrderRig(t)
	a := r.movedUnderA(time.Minute)
	b := r.produce('B', time.Minute)
	r.waitBehind(1)
	cl, ok := r.env.lines.lookup(testConn)
	if !ok {
		t.Fatal("the connection has no lines while an item waits behind another")
	}
	r.close()
	for _, ch := range []<-chan []byte{a, b} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a request did not return within 5s of its connection's end")
		}
	}
	cl.mu.Lock()
	n := len(cl.lines)
	cl.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d lines held once every request returned, want 0", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := r.env.lines.lookup(testConn); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed connection's lines are still held after 5s (%d lines)", r.lines())
		}
		time.Sleep(time.Millisecond)
	}
	if got := r.snd.received(2); got != "" {
		t.Fatalf("the new leader received %q, want nothing", got)
	}
}
