package cluster

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// Counters accumulates Prometheus counters scraped from every broker and
// proxy across restarts: a restarted process starts its counters at zero,
// so a drop is read as a reset and the new value is added whole. Counts made
// between the last scrape and a kill -9 are lost; scraping often keeps that
// small.
type Counters struct {
	mu     sync.Mutex
	last   map[string]float64 // "target|metric" -> last value
	totals map[string]float64 // "broker:metric" or "proxy:metric" -> sum
	errs   int
	done   chan struct{}
}

// counterSeries reports whether a series is a counter worth accumulating.
func counterSeries(series string) bool {
	return strings.HasSuffix(testrig.MetricName(series), "_total")
}

// WatchCounters scrapes every broker's --metrics and every proxy's admin
// /metrics each interval until ctx ends, and once more at the end.
func (c *Cluster) WatchCounters(ctx context.Context, interval time.Duration) *Counters {
	k := &Counters{last: map[string]float64{}, totals: map[string]float64{}}
	k.done = make(chan struct{})
	go func() { // owner: the caller, through ctx and Wait
		defer close(k.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			k.scrapeAll(context.WithoutCancel(ctx), c)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return k
}

func (k *Counters) scrapeAll(ctx context.Context, c *Cluster) {
	for _, b := range c.Brokers {
		if !b.Proc.Running() || b.Proc.Paused() {
			continue
		}
		k.scrape(ctx, "broker", b.Proc.Name(), b.MetricsAddr, "kproxy_")
	}
	for _, p := range c.Proxies {
		if !p.Proc.Running() || p.Proc.Paused() {
			continue
		}
		k.scrape(ctx, "proxy", p.Proc.Name(), p.AdminAddr, "kproxy_")
	}
}

func (k *Counters) scrape(ctx context.Context, role, target, addr, prefix string) {
	// A scrape each interval: one slow process must not hold up the next.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	m, err := testrig.Scrape(sctx, addr, prefix)
	cancel()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.errs++
		return
	}
	for name, v := range m {
		if !counterSeries(name) {
			continue
		}
		key := target + "|" + name
		prev, seen := k.last[key]
		switch {
		case !seen || v < prev:
			k.totals[role+":"+name] += v
		default:
			k.totals[role+":"+name] += v - prev
		}
		k.last[key] = v
	}
}

// Wait blocks until the watcher stopped (its context ended).
func (k *Counters) Wait() { <-k.done }

// Totals returns the accumulated counters by "broker:<series>" and
// "proxy:<series>", and the number of failed scrapes.
func (k *Counters) Totals() (map[string]float64, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]float64, len(k.totals))
	for n, v := range k.totals {
		out[n] = v
	}
	return out, k.errs
}

// Fenced sums the broker counter series that mention fencing in their name
// or labels (kproxy_broker_commit_failures_total{reason="fenced"}).
func (k *Counters) Fenced() float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var sum float64
	for n, v := range k.totals {
		if strings.HasPrefix(n, "broker:") && strings.Contains(n, "fenced") {
			sum += v
		}
	}
	return sum
}
