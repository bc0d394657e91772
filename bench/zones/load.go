package zones

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// warm produces one record to every partition, so that each is owned
// before the first phase (an acquisition would otherwise land in it).
func warm(ctx context.Context, proxy string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxy), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for p := range partitions {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte("warm")})
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// window is the measured part of a phase.
type window struct{ start, end time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// latencies collects one phase's latencies, safe for concurrent use.
type latencies struct {
	mu         sync.Mutex
	e2e, fetch *hdrhistogram.Histogram
}

func (l *latencies) record(h *hdrhistogram.Histogram, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = h.RecordValue(max(d.Microseconds(), 1)) // beyond the range: dropped, counted as error below
}

// fetchHook records the round trip of each fetch in the window.
type fetchHook struct {
	w   window
	lat *latencies
}

func (f fetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == int16(kmsg.Fetch) && e2e.Err() == nil && f.w.holds(time.Now()) {
		f.lat.record(f.lat.fetch, e2e.DurationE2E())
	}
}

// phaseLoad is what the clients of one phase did.
type phaseLoad struct {
	produced, consumed atomic.Int64 // records in the window
	prodErrs           atomic.Int64
	firstErr           atomic.Pointer[string]
}

func (p *phaseLoad) fail(err error) {
	p.prodErrs.Add(1)
	s := err.Error()
	p.firstErr.CompareAndSwap(nil, &s)
}

// runPhase runs a producer and a consumer in every zone on that zone's
// proxy, and adds what the counters moved by to res.
func runPhase(ctx context.Context, cfg Config, proxies, brokers []site, res *ModeResult) error {
	before, err := scrape(ctx, proxies, brokers)
	if err != nil {
		return err
	}
	now := time.Now()
	w := window{start: now.Add(cfg.Warmup), end: now.Add(cfg.Warmup + cfg.Duration)}
	lat := &latencies{e2e: load.NewHistogram(), fetch: load.NewHistogram()}
	var pl phaseLoad
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var consumers, producers sync.WaitGroup
	for _, p := range proxies {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.Rack(p.zone),
			kgo.ClientID("zones-bench-consumer"), kgo.WithHooks(fetchHook{w: w, lat: lat}))
		if err != nil {
			return fmt.Errorf("consumer in %s: %w", p.zone, err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			defer cl.Close()
			consume(cctx, cl, w, lat, &pl)
		}()
	}
	pctx, stopProducers := context.WithDeadline(ctx, w.end)
	defer stopProducers()
	for _, p := range proxies {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic(topic),
			kgo.ClientID("zone="+p.zone+",zones-bench-producer"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ProducerLinger(0))
		if err != nil {
			return fmt.Errorf("producer in %s: %w", p.zone, err)
		}
		producers.Add(1)
		go func() {
			defer producers.Done()
			defer cl.Close()
			produce(pctx, cl, cfg, w, &pl)
		}()
	}
	producers.Wait()
	// Records sent at the end of the window may still be on their way.
	select {
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	stopConsumers()
	consumers.Wait()
	after, err := scrape(ctx, proxies, brokers)
	if err != nil {
		return err
	}
	if pl.consumed.Load() == 0 {
		return errNoRecords
	}
	res.add(after.minus(before), lat, &pl)
	return nil
}

// produce sends cfg.Rate stamped records a second until ctx ends.
func produce(ctx context.Context, cl *kgo.Client, cfg Config, w window, pl *phaseLoad) {
	const tick = 10 * time.Millisecond
	per := cfg.Rate * tick.Seconds()
	t := time.NewTicker(tick)
	defer t.Stop()
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			cl.Flush(context.Background())
			return
		case <-t.C:
		}
		owed += per
		for ; owed >= 1; owed-- {
			v := make([]byte, cfg.RecordSize)
			sent := time.Now()
			binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
			cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
				switch {
				case err != nil && ctx.Err() == nil:
					pl.fail(err)
				case err == nil && w.holds(sent):
					pl.produced.Add(1)
				}
			})
		}
	}
}

// consume reads until ctx ends, timing each record stamped in the window
// from its send to its receipt.
func consume(ctx context.Context, cl *kgo.Client, w window, lat *latencies, pl *phaseLoad) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < 8 {
				return // the warm-up records
			}
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
			if w.holds(sent) {
				pl.consumed.Add(1)
				lat.record(lat.e2e, now.Sub(sent))
			}
		})
	}
}

// counters are the byte counters one phase reads, summed over the sites.
type counters struct {
	proxyFetch, proxyProduce [3]float64 // zone_local true, false, unknown
	brokerFetch              [3]float64 // rack_local true, false, unknown
	cache                    [2]float64 // brokers' segment cache: hits, misses
	raised                   float64    // proxies' fetch answers with a raised high watermark
}

var localities = [3]string{"true", "false", "unknown"}

func scrape(ctx context.Context, proxies, brokers []site) (counters, error) {
	var c counters
	for i, l := range localities {
		for _, p := range proxies {
			for _, m := range []struct {
				api string
				dst *float64
			}{{"Fetch", &c.proxyFetch[i]}, {"Produce", &c.proxyProduce[i]}} {
				v, err := testrig.ScrapeCounterWhere(ctx, p.metricsAddr(), "kproxy_upstream_bytes_total", `api="`+m.api+`"`, `zone_local="`+l+`"`)
				if err != nil {
					return c, fmt.Errorf("proxy %s: %w", p.addr, err)
				}
				*m.dst += v
			}
		}
		for _, b := range brokers {
			v, err := testrig.ScrapeCounterWhere(ctx, b.metricsAddr(), "kproxy_broker_fetch_bytes_total", `rack_local="`+l+`"`)
			if err != nil {
				return c, fmt.Errorf("broker %s: %w", b.addr, err)
			}
			c.brokerFetch[i] += v
		}
	}
	for _, p := range proxies {
		v, err := testrig.ScrapeCounterWhere(ctx, p.metricsAddr(), "kproxy_fetch_watermark_raised_total")
		if err != nil {
			return c, fmt.Errorf("proxy %s: %w", p.addr, err)
		}
		c.raised += v
	}
	for _, b := range brokers {
		for i, r := range []string{"hit", "miss"} {
			v, err := testrig.ScrapeCounterWhere(ctx, b.metricsAddr(), "kproxy_broker_segment_cache_lookups_total", `result="`+r+`"`)
			if err != nil {
				return c, fmt.Errorf("broker %s: %w", b.addr, err)
			}
			c.cache[i] += v
		}
	}
	return c, nil
}

func (c counters) minus(o counters) counters { return c.addTimes(o, -1) }
func (c counters) plus(o counters) counters  { return c.addTimes(o, 1) }

// addTimes is c + k*o, counter by counter.
func (c counters) addTimes(o counters, k float64) counters {
	for i := range 3 {
		c.proxyFetch[i] += k * o.proxyFetch[i]
		c.proxyProduce[i] += k * o.proxyProduce[i]
		c.brokerFetch[i] += k * o.brokerFetch[i]
	}
	for i := range c.cache {
		c.cache[i] += k * o.cache[i]
	}
	c.raised += k * o.raised
	return c
}
