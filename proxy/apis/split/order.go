package split

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Produce order. A client (an idempotent kgo producer: up to five requests
// in flight) pipelines produce requests for one partition on one
// connection, and the broker must append them in that order: a later
// sequence number arriving first is OUT_OF_ORDER_SEQUENCE_NUMBER. First
// attempts keep it (Begin sends them in read order, and the Sender writes
// one affinity's requests to one broker in call order), but each request
// retries on its own: after a leader move, request N+1's part could reach
// the new leader while N's part still waits for its retry, or is still
// in flight to the old leader, which will refuse it.
//
// So an ordered request's items (Request.Ordered) stand in a line, one per
// client connection and partition, in the order the connection's requests
// were read. An item is sent only when every item before it in its line
// has an attempt in flight to the same broker, sent earlier on the same
// ordered path; otherwise it waits behind them (itemBehind) until an item
// before it is answered or sent, or until its request's deadline, when it
// is answered REQUEST_TIMED_OUT (or its last refusal) without a write.
// An item the proxy gives up on (that way, or retries run out, or an
// ambiguous failure) is resent by the client, so the items behind it at
// that moment are answered NOT_LEADER_OR_FOLLOWER unsent instead of being
// written before the resend (leaveLocked).
//
// Only the first item of a line not in flight can be sent next, so only
// that one is woken. Lines hold only items not yet answered: at most the
// connection's requests in flight, each once (a request's duplicate
// listings of one partition are dropped before). An item leaves its line
// when answered, and every item of a request when Finish returns, a
// closed connection included; a connection's lines go when its context
// ends. The happy path takes the connection's own mutex once per Dispatch
// and once per answer, and allocates nothing once its lines are warm.
//
// Held across Send, that mutex also keeps the Sends in admission order. It
// stalls only the connection's own produces while Send waits (for room on a
// broker connection, as the connection's reader already does).

// lineKey names one partition of a connection's lines.
type lineKey struct {
	topic string
	part  int32
}

// lineEnt is one item in a line.
type lineEnt struct {
	s      *Engine // identity only: the fields of another Engine are not read
	i      int32
	wake   chan struct{} // s.wake
	broker int32         // of the attempt in flight
	sent   bool          // an attempt is in flight
	behind bool          // waits for its turn, to be woken
	// poisoned: an earlier item of the line was answered unwritten while
	// this one was behind it; it is not sent again (see leaveLocked).
	poisoned bool
}

type line struct{ ents []lineEnt }

// connLines are one client connection's lines; mu guards them.
type connLines struct {
	mu    sync.Mutex
	lines map[lineKey]*line
	free  []*line // emptied lines, reused
}

// orderLines holds every connection's lines: conn -> *connLines, each
// removed when its connection's context ends. The zero value is ready.
type orderLines struct{ m sync.Map }

func (o *orderLines) of(ctx context.Context, conn uint64) *connLines {
	if cl, ok := o.lookup(conn); ok {
		return cl
	}
	cl := &connLines{lines: make(map[lineKey]*line)}
	v, loaded := o.m.LoadOrStore(conn, cl)
	if !loaded {
		context.AfterFunc(ctx, func() { o.m.CompareAndDelete(conn, cl) })
	}
	return v.(*connLines)
}

// lookup is the connection's lines, if it has any.
func (o *orderLines) lookup(conn uint64) (*connLines, bool) {
	v, ok := o.m.Load(conn)
	if !ok {
		return nil, false
	}
	return v.(*connLines), true
}

// Verdicts of admitLocked.
const (
	admitSend   = iota // send it now
	admitWait          // wait behind the items before it
	admitRefuse        // answer it unsent: an earlier item was answered unwritten
)

// admit routes item i to broker b through its line: true to send it now;
// otherwise it waits behind, or it is answered (s.lostCode, or its last
// refusal) without being sent.
func (s *Engine) admit(i int32, b int32) bool {
	switch s.lines.admitLocked(s, i, b) {
	case admitSend:
		return true
	case admitWait:
		s.items[i].state = itemBehind
		s.behind++
	default:
		it := &s.items[i]
		it.state = itemDone
		if !it.filled {
			it.filled = true
			s.ops.Fail(i, s.lostCode)
		}
	}
	return false
}

// admitLocked says whether item i of s may be sent to broker b now, and
// records that it is (sent) or that it waits behind (not sent). A first
// attempt joins the end of its line.
func (cl *connLines) admitLocked(s *Engine, i int32, b int32) int {
	it := &s.items[i]
	if it.line == nil {
		k := lineKey{it.Topic, it.Part}
		ln := cl.lines[k]
		if ln == nil {
			ln = cl.newLine()
			cl.lines[k] = ln
		}
		ln.ents = append(ln.ents, lineEnt{s: s, i: i, wake: s.wake})
		it.line = ln
	}
	ln := it.line
	k := ln.find(s, i)
	if k < 0 { // not expected: rejoin at the end rather than lose order
		ln.ents = append(ln.ents, lineEnt{s: s, i: i, wake: s.wake})
		k = len(ln.ents) - 1
	}
	if ln.ents[k].poisoned {
		return admitRefuse
	}
	for _, e := range ln.ents[:k] {
		if !e.sent || e.broker != b {
			ln.ents[k].sent, ln.ents[k].behind = false, true
			return admitWait
		}
	}
	ln.ents[k].sent, ln.ents[k].broker, ln.ents[k].behind = true, b, false
	ln.wakeLocked()
	return admitSend
}

func (cl *connLines) newLine() *line {
	if n := len(cl.free); n > 0 {
		ln := cl.free[n-1]
		cl.free[n-1] = nil
		cl.free = cl.free[:n-1]
		return ln
	}
	return &line{}
}

func (ln *line) find(s *Engine, i int32) int {
	for k := range ln.ents {
		if ln.ents[k].s == s && ln.ents[k].i == i {
			return k
		}
	}
	return -1
}

// wakeLocked wakes the first item of the line not in flight, if it waits
// for its turn: it may be the one to go next.
func (ln *line) wakeLocked() {
	for k := range ln.ents {
		if e := &ln.ents[k]; !e.sent {
			if e.behind {
				select {
				case e.wake <- struct{}{}:
				default: // already woken
				}
			}
			return
		}
	}
}

// syncLocked brings the line entries of items idx up to their state: an
// answered item leaves its line, a refused one is no longer in flight.
func (cl *connLines) syncLocked(s *Engine, idx []int32) {
	for _, i := range idx {
		it := &s.items[i]
		if it.line == nil {
			continue
		}
		switch it.state {
		case itemDone:
			cl.leaveLocked(s, i)
		case itemRetry:
			if k := it.line.find(s, i); k >= 0 {
				it.line.ents[k].sent, it.line.ents[k].behind = false, false
			}
		}
	}
}

// leaveLocked takes item i out of its line. If the proxy gave up on it
// (answered it unwritten, or maybe unwritten), the items behind it now
// are not sent again: the client resends i, and an idempotent producer's
// later sequence numbers must not reach the broker before it (nor a plain
// producer's later records). They are answered NOT_LEADER_OR_FOLLOWER
// unwritten at their next attempt, and the client resends them after i.
// Items that join the line later (the client's resends among them) are
// not affected.
func (cl *connLines) leaveLocked(s *Engine, i int32) {
	it := &s.items[i]
	ln := it.line
	it.line = nil
	if k := ln.find(s, i); k >= 0 {
		ln.ents = slices.Delete(ln.ents, k, k+1) // clears the tail: no stale Engine pointer
		for ; it.gaveUp && k < len(ln.ents); k++ {
			ln.ents[k].poisoned = true // behind i
		}
	}
	if len(ln.ents) > 0 {
		ln.wakeLocked()
		return
	}
	delete(cl.lines, lineKey{it.Topic, it.Part})
	cl.free = append(cl.free, ln)
}

// unsentLocked records that items idx are not in flight after all (Send
// failed), before any later item is admitted behind them.
func (cl *connLines) unsentLocked(s *Engine, idx []int32) {
	for _, i := range idx {
		if ln := s.items[i].line; ln != nil {
			if k := ln.find(s, i); k >= 0 {
				ln.ents[k].sent = false
			}
		}
	}
}

// lockLines takes the connection's lines for a Dispatch; unlockLines
// settles the items it answered locally and lets them go.
func (s *Engine) lockLines(ctx context.Context) {
	if s.lines == nil {
		s.lines = s.env.lines.of(ctx, s.conn)
	}
	s.lines.mu.Lock()
}

func (s *Engine) unlockLines() {
	for i := range s.items {
		if it := &s.items[i]; it.line != nil && it.state == itemDone {
			s.lines.leaveLocked(s, int32(i))
		}
	}
	s.lines.mu.Unlock()
}

// syncLines is syncLocked under the lines' lock.
func (s *Engine) syncLines(idx []int32) {
	if s.lines == nil {
		return
	}
	s.lines.mu.Lock()
	s.lines.syncLocked(s, idx)
	s.lines.mu.Unlock()
}

// leaveLines takes every item of s still in a line out (Finish returns).
func (s *Engine) leaveLines() {
	if s.lines == nil {
		return
	}
	s.lines.mu.Lock()
	for i := range s.items {
		if s.items[i].line != nil {
			s.lines.leaveLocked(s, int32(i))
		}
	}
	s.lines.mu.Unlock()
}

// tooEarly retries item i, which its broker refused as out of order
// (OUT_OF_ORDER_SEQUENCE_NUMBER: nothing was written), if an earlier item
// of its line is still unanswered: the broker saw i first (that one was
// sent before i to a broker that refused it, and this broker became the
// leader in between, say), so i goes again, behind it; Kafka's producer
// retries such a batch too. The broker is not avoided: it is the leader.
// It reports whether i is retried.
func (s *Engine) tooEarly(i int32, code int16) bool {
	it := &s.items[i]
	if it.line == nil {
		return false
	}
	s.lines.mu.Lock()
	k := it.line.find(s, i)
	s.lines.mu.Unlock()
	if k <= 0 { // first of its line: the broker's answer stands
		return false
	}
	if _, ok := s.env.Backoff(int(it.tries), s.deadline); !ok {
		return false
	}
	it.state, it.due = itemRetry, s.env.Now() // it waits behind anyway
	s.retries++
	s.env.Metrics.Retried(s.key, code, nil)
	return true
}

// sendBehind sends the items that waited for their turn, or answers them
// once the request's deadline passed: REQUEST_TIMED_OUT if never answered
// (nothing was written), else their last refusal.
func (s *Engine) sendBehind(ctx context.Context, now time.Time) {
	if ctx.Err() != nil { // the connection ended: Finish returns
		return
	}
	expired := !s.deadline.IsZero() && !now.Before(s.deadline)
	for i := range s.items {
		it := &s.items[i]
		if it.state != itemBehind {
			continue
		}
		s.behind--
		switch {
		case !expired:
			it.state = itemIdle
		case it.filled:
			it.state, it.gaveUp = itemDone, true
		default:
			s.done(int32(i), s.ambCode)
		}
	}
	s.Dispatch(ctx, nil) // also settles the expired ones
}
