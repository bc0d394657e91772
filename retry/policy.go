package retry

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff with jitter and an attempt limit.
type Policy struct {
	Initial, Max time.Duration // first retry's delay; upper bound of every delay
	Multiplier   float64       // growth per retry (values below 1 mean 1)
	Jitter       float64       // +/- fraction of each delay, in [0, 1]
	MaxAttempts  int           // attempts in total, the first included; <= 0 means 1
}

// DefaultPolicy suits routing retries: ownership moves settle within a watch
// round trip, so early retries are quick and later ones back off. The
// request's own deadline is what normally ends retries: a partition whose
// owner died stays owned until its lease runs out (up to a lease TTL), and a
// produce must keep trying for that long if its timeout allows. The attempt
// cap only bounds requests whose deadline is far away.
func DefaultPolicy() Policy {
	return Policy{Initial: 10 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxAttempts: 100}
}

// Backoff is the delay before the next attempt after attempt failed
// attempts: Initial after the first failure, then Multiplier times more per
// failure, capped at Max; 0 for attempt <= 0. rnd supplies the jitter (nil:
// none). The result never exceeds Max.
func (p Policy) Backoff(attempt int, rnd *rand.Rand) time.Duration {
	if attempt <= 0 || p.Initial <= 0 {
		return 0
	}
	mult := max(p.Multiplier, 1)
	d := float64(p.Initial) * math.Pow(mult, float64(min(attempt-1, 64)))
	// Without Max, still stay far from int64 overflow.
	d = min(d, float64(1<<62))
	if p.Max > 0 {
		d = min(d, float64(p.Max))
	}
	if j := min(max(p.Jitter, 0), 1); j > 0 && rnd != nil {
		d *= 1 - j + 2*j*rnd.Float64()
	}
	if p.Max > 0 {
		d = min(d, float64(p.Max))
	}
	return time.Duration(max(d, 0))
}

// Next says whether another attempt may follow attempt failed attempts, and
// after which delay: only if fewer than MaxAttempts were made and the delay
// ends before deadline (a zero deadline means none).
func (p Policy) Next(attempt int, now, deadline time.Time, rnd *rand.Rand) (time.Duration, bool) {
	if attempt >= max(p.MaxAttempts, 1) {
		return 0, false
	}
	d := p.Backoff(attempt, rnd)
	if !deadline.IsZero() && !now.Add(d).Before(deadline) {
		return 0, false
	}
	return d, true
}

// Budget is the deadline for retrying a request that arrived at now: the
// request's own timeout (produce timeout_ms, fetch max_wait_ms), but at least
// floor so that a request with a tiny or zero timeout still gets a few quick
// retries. The client's answer is due by then, retried or not.
func Budget(now time.Time, requestTimeout time.Duration, floor time.Duration) time.Time {
	return now.Add(max(requestTimeout, floor, 0))
}

// Wait sleeps for d, or returns ctx's error if ctx ends first.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
