// Package soak runs a proxy for a long time under well-behaved and hostile
// clients and samples it (issue 20): `kproxy etcd`, three `kproxy broker`
// and one `kproxy serve` as processes (internal/testrig), an idempotent kgo
// producer and a kgo consumer group that keep working throughout, and,
// after a baseline phase without them, hostile clients cycling through
// every pattern of testkit/hostile; then a cool-down without them. Every
// Every it samples the proxy's RSS, heap, goroutines and open files and
// the producer's p99 latency. It judges nothing itself: report.go states
// the targets and whether each was met.
package soak

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/testkit/hostile"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Config says what to run. Zero values take the defaults in brackets.
type Config struct {
	Kproxy   string        // the kproxy binary (required)
	Dir      string        // logs and data (required)
	Duration time.Duration // the whole run [30m]
	Every    time.Duration // sampling interval [10s]
	// Baseline and CoolDown are the phases without hostile clients at the
	// start and the end [a sixth of Duration, at least 30s; a tenth, at
	// least 30s]; the hostile phase is the rest.
	Baseline, CoolDown time.Duration
	// PatternFor is how long each hostile pattern runs in turn [20s, or
	// less so that every pattern runs at least once].
	PatternFor   time.Duration
	Attackers    int           // hostile connections at once [8]
	Idle         int           // idle hostile connections held during the hostile phase [100]
	ProduceEvery time.Duration // one 1 KiB record per [10ms]
	// Pause paces each attacker (hostile.Config.Pause) [2ms]: the soak is
	// about memory and fairness, not about out-spinning the clients for
	// the machine's CPUs.
	Pause time.Duration
	Log   func(format string, args ...any)
}

// Phases of a run. After the baseline, hostile segments (one pattern each)
// alternate with quiet gaps half as long, so that the latency without
// hostile clients is measured throughout the run, under whatever else the
// machine is doing at the time, not only at its start.
const (
	PhaseBaseline = "baseline"
	PhaseHostile  = "hostile"
	PhaseQuiet    = "quiet"
	PhaseCoolDown = "cool-down"
)

// Latency buckets of Result.Latencies: records produced while hostile
// traffic ran, and the others.
const (
	WithHostile    = "with hostile clients"
	WithoutHostile = "without hostile clients"
)

// Sample is one look at the proxy.
type Sample struct {
	At                time.Duration // since the start of the baseline
	Phase             string
	Pattern           string // the hostile pattern running, if any
	RSS, Heap         int64
	Goroutines, FDs   int
	P99               time.Duration // of the records acknowledged since the last sample
	Acked             int64         // in that window
	ProduceErrs       int64         // cumulative
	ConsumeErrs       int64         // cumulative
	Consumed          int64         // cumulative
	BadInput, Refused float64       // cumulative kproxy_bad_input_total and kproxy_connections_refused_total
}

// Result is a run's samples and the latencies of each phase.
type Result struct {
	Config    Config
	Samples   []Sample
	Latencies map[string][]time.Duration // WithHostile, WithoutHostile
	Patterns  []string
	FirstErr  error // the first producer or consumer error
}

func (c *Config) setDefaults() {
	c.Duration = max(c.Duration, 0)
	if c.Duration == 0 {
		c.Duration = 30 * time.Minute
	}
	if c.Every <= 0 {
		c.Every = 10 * time.Second
	}
	if c.Baseline <= 0 {
		c.Baseline = max(c.Duration/6, 30*time.Second)
	}
	if c.CoolDown <= 0 {
		c.CoolDown = max(c.Duration/10, 30*time.Second)
	}
	if c.PatternFor <= 0 {
		phase := c.Duration - c.Baseline - c.CoolDown // 2/3 hostile, 1/3 quiet gaps
		c.PatternFor = max(min(20*time.Second, phase*2/3/time.Duration(len(hostile.Patterns()))), time.Second)
	}
	if c.Attackers <= 0 {
		c.Attackers = 8
	}
	if c.Idle <= 0 {
		c.Idle = 100
	}
	if c.ProduceEvery <= 0 {
		c.ProduceEvery = 10 * time.Millisecond
	}
	if c.Pause <= 0 {
		c.Pause = 2 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

const topic = "soak"

// Run runs the cluster and the clients for cfg.Duration and returns what
// it sampled.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.setDefaults()
	if cfg.Baseline+cfg.CoolDown >= cfg.Duration {
		return nil, fmt.Errorf("soak: baseline %v and cool-down %v leave no hostile phase in %v", cfg.Baseline, cfg.CoolDown, cfg.Duration)
	}
	env, err := start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	res := &Result{Config: cfg, Latencies: map[string][]time.Duration{}, Patterns: hostile.Patterns()}
	w := newWorkload(env.proxy.Addr, cfg)
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	defer w.stop()
	cfg.Log("cluster up; baseline %v, hostile %v (each pattern %v), cool-down %v",
		cfg.Baseline, cfg.Duration-cfg.Baseline-cfg.CoolDown, cfg.PatternFor, cfg.CoolDown)

	begin := time.Now()
	var ph phases
	ph.set(PhaseBaseline, "")
	var wg sync.WaitGroup
	hctx, stopHostile := context.WithCancel(ctx)
	defer stopHostile()
	wg.Go(func() { hostileSchedule(hctx, cfg, begin, env.proxy.Addr, res.Patterns, w, &ph) })
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	end := time.After(cfg.Duration)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			stopHostile()
			wg.Wait()
			return res, ctx.Err()
		case <-end:
			done = true
		case <-tick.C:
		}
		s, err := env.sample(ctx)
		if err != nil {
			return res, err
		}
		s.At = time.Since(begin)
		s.Phase, s.Pattern = ph.get()
		w.fill(&s)
		res.Samples = append(res.Samples, s)
		cfg.Log("%6s %-9s %-22s RSS %4d MiB heap %4d MiB goroutines %5d fds %5d p99 %6.1f ms acked %5d errors %d/%d",
			s.At.Round(time.Second), s.Phase, s.Pattern, s.RSS>>20, s.Heap>>20, s.Goroutines, s.FDs,
			float64(s.P99.Microseconds())/1000, s.Acked, s.ProduceErrs, s.ConsumeErrs)
	}
	stopHostile()
	wg.Wait()
	w.stop()
	res.Latencies, res.FirstErr = w.result()
	return res, nil
}

// phases is what the sampler reads of the hostile schedule: the phase and
// the pattern running in it ("" for none).
type phases struct{ phase, pattern atomic.Pointer[string] }

func (p *phases) set(phase, pattern string) { p.pattern.Store(&pattern); p.phase.Store(&phase) }

func (p *phases) get() (phase, pattern string) { return *p.phase.Load(), *p.pattern.Load() }

// hostileSchedule runs the hostile patterns in turn from the end of the
// baseline until the cool-down, each for cfg.PatternFor followed by a
// quiet half of that; it returns when ctx ends or the schedule does.
func hostileSchedule(ctx context.Context, cfg Config, begin time.Time, addr string, patterns []string, w *workload, ph *phases) {
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !wait(cfg.Baseline) {
		return
	}
	hostileUntil := begin.Add(cfg.Duration - cfg.CoolDown)
	for i := 0; time.Now().Before(hostileUntil) && ctx.Err() == nil; i++ {
		name := patterns[i%len(patterns)]
		ph.set(PhaseHostile, name)
		w.hostile.Store(true)
		pctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(cfg.PatternFor), hostileUntil))
		hostile.Run(pctx, hostile.Config{Addr: addr, Attackers: cfg.Attackers, Idle: cfg.Idle, Seed: uint64(i),
			Patterns: []string{name}, FetchTopic: topic, ConnLife: 2 * time.Second, Pause: cfg.Pause})
		cancel()
		w.hostile.Store(false)
		ph.set(PhaseQuiet, "")
		if !wait(min(cfg.PatternFor/2, time.Until(hostileUntil))) {
			return
		}
	}
	ph.set(PhaseCoolDown, "")
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// env is the cluster's processes: etcd, 3 brokers and the proxy.
type env struct {
	stack *testrig.Stack
	proxy *testrig.Proxy
}

func start(ctx context.Context, cfg Config) (*env, error) {
	st, err := testrig.StartStack(ctx, testrig.StackConfig{
		Kproxy: cfg.Kproxy, LogDir: cfg.Dir, EtcdDataDir: filepath.Join(cfg.Dir, "etcd"),
		Cluster: testrig.ClusterConfig{Partitions: 3, LogLevel: "warn"},
		Brokers: 3, Proxies: 1,
	})
	if err != nil {
		return nil, err
	}
	return &env{stack: st, proxy: st.Cluster.Proxies[0]}, nil
}

func (e *env) close() { e.stack.Close() }

// sample reads the proxy's memory from /proc and its metrics.
func (e *env) sample(ctx context.Context) (Sample, error) {
	var s Sample
	var err error
	if s.RSS, err = testrig.RSSBytes(e.proxy.Proc.Pid()); err != nil {
		return s, err
	}
	scrape := func(name string) float64 {
		v, serr := testrig.ScrapeCounter(ctx, e.proxy.AdminAddr, name)
		err = errors.Join(err, serr)
		return v
	}
	s.Heap = int64(scrape("go_gc_heap_live_bytes"))
	s.Goroutines = int(scrape("go_goroutines"))
	s.FDs = int(scrape("process_open_fds"))
	s.BadInput = scrape("kproxy_bad_input_total")
	s.Refused = scrape("kproxy_connections_refused_total")
	return s, err
}

// percentile is the p-th percentile of d (sorted in place).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// workload is the well-behaved clients: a producer (idempotent, acks all)
// and a consumer group on the same topic.
type workload struct {
	addr string
	cfg  Config
	prod *kgo.Client
	cons *kgo.Client
	wg   sync.WaitGroup // the consumer
	pwg  sync.WaitGroup // the producer's loop
	stp  context.CancelFunc
	pstp context.CancelFunc
	once sync.Once

	hostile atomic.Bool // hostile traffic is running

	mu       sync.Mutex
	window   []time.Duration
	byBucket map[string][]time.Duration
	firstErr error

	prodErrs, consErrs, consumed atomic.Int64
}

func newWorkload(addr string, cfg Config) *workload {
	return &workload{addr: addr, cfg: cfg, byBucket: map[string][]time.Duration{}}
}

func (w *workload) start(ctx context.Context) error {
	var err error
	w.prod, err = kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ClientID("soak-producer"))
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = w.prod.ProduceSync(wctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr()
	cancel()
	if err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}
	w.cons, err = kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.ConsumerGroup("soak-group"), kgo.ConsumeTopics(topic),
		kgo.ClientID("soak-consumer"))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	pctx, pstop := context.WithCancel(context.Background())
	w.stp, w.pstp = stop, pstop
	value := make([]byte, 1<<10)
	w.pwg.Go(func() {
		tick := time.NewTicker(w.cfg.ProduceEvery)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			began := time.Now()
			bucket := WithoutHostile
			if w.hostile.Load() {
				bucket = WithHostile
			}
			// Not pctx: stopping the loop must not fail what is buffered.
			w.prod.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					w.prodErrs.Add(1)
					w.fail(fmt.Errorf("produce: %w", err))
					return
				}
				took := time.Since(began)
				w.mu.Lock()
				w.window = append(w.window, took)
				w.byBucket[bucket] = append(w.byBucket[bucket], took)
				w.mu.Unlock()
			})
		}
	})
	w.wg.Go(func() {
		for rctx.Err() == nil {
			fs := w.cons.PollFetches(rctx)
			fs.EachError(func(t string, p int32, err error) {
				if rctx.Err() == nil && !errors.Is(err, context.Canceled) {
					w.consErrs.Add(1)
					w.fail(fmt.Errorf("consume %s/%d: %w", t, p, err))
				}
			})
			w.consumed.Add(int64(fs.NumRecords()))
		}
	})
	return nil
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// fill adds the producer's window p99 and the clients' counters to s.
func (w *workload) fill(s *Sample) {
	w.mu.Lock()
	win := w.window
	w.window = nil
	w.mu.Unlock()
	s.P99, s.Acked = percentile(win, 0.99), int64(len(win))
	s.ProduceErrs, s.ConsumeErrs, s.Consumed = w.prodErrs.Load(), w.consErrs.Load(), w.consumed.Load()
}

func (w *workload) stop() {
	w.once.Do(func() {
		if w.stp == nil {
			return
		}
		w.pstp()
		w.pwg.Wait()
		fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := w.prod.Flush(fctx); err != nil {
			w.fail(fmt.Errorf("flush producer: %w", err))
		}
		w.stp()
		w.wg.Wait()
		w.prod.Close()
		w.cons.Close()
	})
}

func (w *workload) result() (map[string][]time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byBucket, w.firstErr
}
