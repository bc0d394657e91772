package split

import (
	"context"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loop is the engine's wait: it takes answers as they come, sends retries
// when they are due (or when routing names a new owner), and ends when
// every item is answered, or when the Adapter has enough and the grace is
// over (fetch).
func (s *Engine) loop(ctx context.Context) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.handleSendErrors()
		if s.outstanding == 0 && s.retries == 0 && s.behind == 0 {
			return nil
		}
		now := s.env.Now()
		if s.behind > 0 && ctx.Err() == nil && !s.deadline.IsZero() && !now.Before(s.deadline) {
			s.sendBehind(ctx, now) // answers them
			continue
		}
		if s.poller != nil && s.poller.Enough() {
			if s.grace.IsZero() {
				s.grace = now.Add(graceFor(now.Sub(s.start)))
			}
			if !now.Before(s.grace) {
				s.env.Metrics.Early()
				return nil
			}
		}
		if s.retries > 0 && s.resendDue(ctx, now) {
			continue
		}
		if si := s.inlineSub(); si >= 0 {
			body, err := s.subs[si].p.Wait(ctx)
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", kmsg.NameForKey(s.key), context.Cause(ctx))
			}
			s.handle(si, body, err)
			continue
		}
		if s.concurrent {
			s.launch(ctx)
		}
		wake, changed := s.wakeAt()
		var turn <-chan struct{}
		if s.behind > 0 {
			turn = s.wake
			if !s.deadline.IsZero() && (wake.IsZero() || s.deadline.Before(wake)) {
				wake = s.deadline
			}
		}
		var timerC <-chan time.Time
		if !wake.IsZero() {
			if timer == nil {
				timer = time.NewTimer(wake.Sub(now))
			} else {
				timer.Reset(wake.Sub(now))
			}
			timerC = timer.C
		}
		select {
		case r := <-s.results:
			s.waiting--
			s.handle(r.si, r.body, r.err)
		case <-timerC:
		case <-changed:
		case <-turn:
			s.sendBehind(ctx, s.env.Now())
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", kmsg.NameForKey(s.key), context.Cause(ctx))
		}
	}
}

// graceFor is how long, once enough is in hand (a fetch's MinBytes), the
// other brokers still get to answer: as long again as the first answers
// took, within bounds. Brokers with data answer about as fast as the first
// one did, so under load every broker's data makes it into the answer
// (abandoning them would throw their reads away on every fetch), while an
// idle broker, which would hold its answer for MaxWait, is cut off early.
func graceFor(took time.Duration) time.Duration {
	return min(max(took, minGrace), maxGrace)
}

const (
	minGrace = time.Millisecond
	maxGrace = 50 * time.Millisecond
)

// wakeAt is when the loop must look again without a result: the earliest
// retry, or the end of the grace. changed fires on a routing change while retries wait (a new owner
// may be known).
func (s *Engine) wakeAt() (time.Time, <-chan struct{}) {
	wake := s.grace
	var changed <-chan struct{}
	if s.retries > 0 {
		changed = s.env.Routes.Changed()
		for i := range s.items {
			if it := &s.items[i]; it.state == itemRetry && (wake.IsZero() || it.due.Before(wake)) {
				wake = it.due
			}
		}
	}
	return wake, changed
}

// inlineSub returns the sub-request to wait for without a goroutine: the
// oldest one unless waits are concurrent, then only one left alone.
func (s *Engine) inlineSub() int {
	if s.outstanding == 0 || (s.concurrent && (s.outstanding != 1 || s.retries != 0 || s.waiting != 0 || !s.grace.IsZero())) {
		return -1
	}
	for si := range s.subs {
		if s.subs[si].state == subSent {
			return si
		}
	}
	return -1
}

// launch hands every sent sub-request to a goroutine that waits for it.
// The goroutines wait with ctx (the client connection's), not with a
// context of this call: cleanup may park a long poll the answer did not
// wait for, for the connection's next fetch (see longPoll).
func (s *Engine) launch(ctx context.Context) {
	for si := range s.subs {
		sb := &s.subs[si]
		if sb.state != subSent {
			continue
		}
		s.ensureResults()
		sb.lp = &longPoll{results: s.results, si: si, p: sb.p}
		sb.state = subWaiting
		s.waiting++
		s.env.polls.Add(1)
		go sb.lp.wait(ctx, sb.p, &s.env.polls) // no closure: the hot path allocates no more than the goroutine
	}
}

func (s *Engine) ensureResults() {
	if cap(s.results) < len(s.items) { // no more subs than items are outstanding
		s.results = make(chan result, len(s.items))
	}
}

// cleanup detaches the goroutines still waiting (an early fetch answer
// leaves idle brokers behind), parking their long polls for the
// connection's next fetch, and releases the call's buffers.
func (s *Engine) cleanup(ctx context.Context) {
	for si := range s.subs {
		sb := &s.subs[si]
		if sb.state != subWaiting {
			continue
		}
		if sb.lp.detach() {
			<-s.results // delivered, never read: keep the pooled channel empty
		} else if ctx.Err() == nil && sb.first {
			sig := s.poller.Signature(nil, sb.idx)
			s.env.parked.park(parkKey{conn: s.conn, broker: sb.broker}, sb.lp, sig)
		}
		sb.lp = nil
		s.waiting--
	}
	if s.ordered {
		s.leaveLines()
	}
	s.reclaim()
	s.own = nil
}

// reclaim waits until no sub-request's write reads the client's body (see
// VecAdapter), withdrawing those still queued: the caller reuses the body's
// frame once Finish returns.
func (s *Engine) reclaim() {
	if s.vec == nil {
		return
	}
	for si := range s.subs {
		if l, ok := s.subs[si].p.(upstream.Lender); ok {
			l.Reclaim()
		}
	}
}

// resendDue sends the retries that are due, or whose owner moved; it
// reports whether it sent anything.
func (s *Engine) resendDue(ctx context.Context, now time.Time) bool {
	n := 0
	for i := range s.items {
		it := &s.items[i]
		if it.state != itemRetry || (now.Before(it.due) && !s.ownerMoved(it)) {
			continue
		}
		it.state = itemIdle
		s.retries--
		n++
	}
	if n == 0 {
		return false
	}
	s.Dispatch(ctx, nil)
	return true
}
