package quota

import (
	"sync"
	"time"
)

// bucket measures one entity's rate against its limit. Kafka's throttle,
// (observed - limit) / limit * window, is the usage over the limit within
// the window divided by the limit; the bucket keeps that excess directly,
// as Kafka's KIP-599 mutation quotas do: credit refills at the limit up to
// burst (the window's worth, as much as Kafka's window lets a new client
// send at once), usage spends it, and a debt is the throttle times the
// limit. Kafka's sampled windows restart when they expire, so after a
// burst a throttled client is judged on the same bytes again and a
// pipelining producer ends well under its quota (measured: ~89%); the
// bucket holds it to the limit.
type bucket struct {
	mu     sync.Mutex
	credit float64 // may be negative: a debt to wait off
	at     time.Time
	full   bool // credit not yet initialised: starts full
}

func newBucket(now time.Time) *bucket { return &bucket{at: now, full: true} }

// record spends v at now against limit (per second), with burst seconds of
// credit at most and maxWait of debt at most, and returns the throttle.
func (b *bucket) record(v, limit float64, now time.Time, burst, maxWait time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	top := limit * burst.Seconds()
	if b.full {
		b.credit, b.full = top, false
	} else if dt := now.Sub(b.at); dt > 0 {
		b.credit = min(top, b.credit+limit*dt.Seconds())
	}
	b.at = now
	b.credit = max(b.credit-v, -limit*maxWait.Seconds())
	return throttleTime(-b.credit, limit, maxWait)
}

// idle reports whether nothing was recorded since before.
func (b *bucket) idle(before time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at.Before(before)
}

// throttleTime is how long a debt takes to pay off at limit per second,
// bounded by max: Kafka's (observed - limit) / limit * window with
// observed*window - limit*window as the debt.
func throttleTime(debt, limit float64, max time.Duration) time.Duration {
	if debt <= 0 {
		return 0
	}
	if limit <= 0 {
		return max
	}
	return min(time.Duration(debt/limit*float64(time.Second)), max)
}
