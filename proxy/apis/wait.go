package apis

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loop is the engine's wait: it takes answers as they come, sends retries
// when they are due (or when routing names a new owner), and ends when
// every item is answered, or when the adapter has enough and the grace is
// over (fetch).
func (s *splitter) loop(ctx context.Context) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.handleSendErrors()
		if s.outstanding == 0 && s.retries == 0 {
			return nil
		}
		now := s.d.now()
		if s.ops.enough() {
			if s.grace.IsZero() {
				s.grace = now.Add(graceFor(now.Sub(s.start)))
			}
			if !now.Before(s.grace) {
				s.d.m.early.Inc()
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
func (s *splitter) wakeAt() (time.Time, <-chan struct{}) {
	wake := s.grace
	var changed <-chan struct{}
	if s.retries > 0 {
		changed = s.d.routes.Changed()
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
func (s *splitter) inlineSub() int {
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
func (s *splitter) launch(ctx context.Context) {
	for si := range s.subs {
		sb := &s.subs[si]
		if sb.state != subSent {
			continue
		}
		if s.wctx == nil {
			if cap(s.results) < len(s.items) { // no sub-request has more items
				s.results = make(chan result, len(s.items))
			}
			s.wctx, s.cancel = context.WithCancel(ctx)
		}
		sb.state = subWaiting
		s.waiting++
		go waitSub(s.wctx, s.results, si, sb.p)
	}
}

// waitSub is the goroutine launch starts; cleanup receives what it sends.
func waitSub(ctx context.Context, results chan<- result, si int, p Pending) {
	body, err := p.Wait(ctx)
	results <- result{si: si, body: body, err: err}
}

// cleanup stops the goroutines still waiting (an early fetch answer leaves
// idle brokers behind) and releases the call's buffers.
func (s *splitter) cleanup() {
	if s.cancel != nil {
		s.cancel()
		for ; s.waiting > 0; s.waiting-- {
			<-s.results
		}
		s.cancel, s.wctx = nil, nil
	}
	s.d.putBuf(s.own)
	s.own = nil
}
