// Package pacer bounds the lease acquisitions a stub broker has in flight.
package pacer

import (
	"context"
	"time"
)

// Kind is what an acquisition is for, as reported to Config.Refused.
type Kind int

const (
	Partition Kind = iota // a partition's ownership, taken by its first append
	Group                 // a group's coordinator lease, taken by its first request
)

func (k Kind) String() string {
	if k == Group {
		return "group"
	}
	return "partition"
}

// Config configures a Pacer; every field has a default.
type Config struct {
	// Max is the number of acquisitions in flight at once (default 1024:
	// eight batched etcd transactions' worth, which keeps etcd's pipeline
	// full; with 256 a 100k-partition cold start was refused about 5.6
	// times per partition and took 28-31 s, with 1024 about 4 times and
	// 25-28 s, and 4096 did no better).
	Max int
	// Wait is how long Take waits for a free slot (default 1s: many batched
	// transactions' time, well inside a produce or join request's timeout).
	Wait time.Duration
	// Refused is called for every Take that got no slot within Wait (nil:
	// not counted). It must be cheap.
	Refused func(Kind)
}

// Pacer is the one budget of lease acquisitions in flight that a broker's
// partitions and group coordinators share. It promises that at most Max
// acquisitions hold a slot at once, so a storm of first requests (a cold
// start, the takeover of a dead broker's partitions and groups) reaches etcd
// at the rate it commits them instead of all at once, and that Take never
// holds a caller longer than Wait: a caller that gets no slot answers its
// client at once with a code the client retries, instead of queueing behind
// etcd. A Pacer is safe for concurrent use.
type Pacer struct {
	slots   chan struct{} // one token per acquisition in flight
	wait    time.Duration
	refused func(Kind)
}

// New returns a Pacer with every slot free.
func New(cfg Config) *Pacer {
	if cfg.Max <= 0 {
		cfg.Max = 1024
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	if cfg.Refused == nil {
		cfg.Refused = func(Kind) {}
	}
	return &Pacer{slots: make(chan struct{}, cfg.Max), wait: cfg.Wait, refused: cfg.Refused}
}

// Take takes a slot for an acquisition of kind k, waiting at most the
// Pacer's Wait or until ctx ends. true means the caller holds a slot and
// must Release it when its acquisition is over.
func (p *Pacer) Take(ctx context.Context, k Kind) bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(p.wait)
	defer t.Stop()
	select {
	case p.slots <- struct{}{}:
		return true
	case <-t.C:
		p.refused(k)
	case <-ctx.Done(): // the caller gave up or is closing: not a refusal
	}
	return false
}

// Release frees a slot taken by a successful Take.
func (p *Pacer) Release() { <-p.slots }

// Max is the number of acquisitions the Pacer lets run at once.
func (p *Pacer) Max() int { return cap(p.slots) }
