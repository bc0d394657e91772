package hostile

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// MeasureConfig runs `kproxy dev` from Binary, sends Traffic to it for
// Duration while a kgo producer writes one record per ProduceEvery, and
// measures the process.
type MeasureConfig struct {
	Binary       string
	Dir          string // the dev cluster's data directory and its log
	Duration     time.Duration
	ProduceEvery time.Duration // [50ms]
	Traffic      Config        // Addr is filled in
	// PerPattern runs each of Patterns() alone for Duration, then waits
	// Settle [20s], and reports RSS and heap before, during and after
	// each (Report.Patterns), after the mixed run.
	PerPattern bool
	Settle     time.Duration
}

// PatternReport is the proxy's memory around one pattern: before it, its
// peak while it ran, and Settle after it stopped.
type PatternReport struct {
	Name                            string
	RSSBefore, RSSPeak, RSSAfter    int64
	HeapBefore, HeapPeak, HeapAfter int64 // go_gc_heap_live_bytes: live at the last collection
	BadInput                        float64
}

func (r PatternReport) String() string {
	return fmt.Sprintf("%-22s RSS %4d / %4d / %4d MiB   heap %4d / %4d / %4d MiB   bad input %6.0f",
		r.Name, r.RSSBefore>>20, r.RSSPeak>>20, r.RSSAfter>>20, r.HeapBefore>>20, r.HeapPeak>>20, r.HeapAfter>>20, r.BadInput)
}

// Report is what Measure saw.
type Report struct {
	RSSBefore, RSSPeak, RSSAfter int64 // bytes
	LogLines, WarnLines          int   // written while the traffic ran
	Produced, Acked              int64
	ProduceErr                   error // the first producer error
	BadInput                     float64
	Traffic                      Stats
	Patterns                     []PatternReport // with PerPattern: before / peak / after
}

func (r Report) String() string {
	var per strings.Builder
	for _, p := range r.Patterns {
		per.WriteString("\n  " + p.String())
	}
	if per.Len() > 0 {
		per.WriteString("\n  (before / peak / after each pattern alone)")
	}
	return fmt.Sprintf("RSS before %d MiB, peak %d MiB, after %d MiB; %d log lines (%d WARN or worse) during the traffic; "+
		"producer %d/%d acknowledged (first error: %v); kproxy_bad_input_total %.0f; traffic: %d attacker conns, %d bad frames, %d idle conns, %d dial errors",
		r.RSSBefore>>20, r.RSSPeak>>20, r.RSSAfter>>20, r.LogLines, r.WarnLines, r.Acked, r.Produced, r.ProduceErr, r.BadInput,
		r.Traffic.Dials, r.Traffic.Frames, r.Traffic.IdleOpened, r.Traffic.DialErrors) + per.String()
}

// Measure starts the dev cluster, measures it under traffic and stops it.
func Measure(ctx context.Context, cfg MeasureConfig) (Report, error) {
	if cfg.ProduceEvery == 0 {
		cfg.ProduceEvery = 50 * time.Millisecond
	}
	var rep Report
	p, err := startDev(ctx, cfg.Binary, cfg.Dir)
	if err != nil {
		return rep, err
	}
	defer p.stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("hostile"), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return rep, fmt.Errorf("kgo client: %w", err)
	}
	defer cl.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = cl.ProduceSync(wctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr()
	cancel()
	if err != nil {
		return rep, fmt.Errorf("warm-up produce: %w", err)
	}
	if rep.RSSBefore, err = rss(p.pid()); err != nil {
		return rep, err
	}
	linesBefore, warnBefore, err := countLog(p.logPath)
	if err != nil {
		return rep, err
	}

	tctx, stopTraffic := context.WithTimeout(ctx, cfg.Duration)
	defer stopTraffic()
	var wg sync.WaitGroup
	var peak atomic.Int64
	peak.Store(rep.RSSBefore)
	wg.Go(func() { samplePeak(tctx, p.pid(), &peak) })
	tcfg := cfg.Traffic
	tcfg.Addr = p.addr
	wg.Go(func() { rep.Traffic = Run(tctx, tcfg) })
	var sp steadyProducer
	wg.Go(func() { sp.run(tctx, ctx, cl, cfg.ProduceEvery) })
	wg.Wait()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		return rep, fmt.Errorf("flush producer: %w", err)
	}
	rep.Produced, rep.Acked = sp.produced, sp.acked.Load()
	if e := sp.firstErr.Load(); e != nil {
		rep.ProduceErr = *e
	}
	rep.RSSPeak = peak.Load()
	if rep.RSSAfter, err = rss(p.pid()); err != nil {
		return rep, err
	}
	rep.RSSPeak = max(rep.RSSPeak, rep.RSSAfter)
	lines, warn, err := countLog(p.logPath)
	if err != nil {
		return rep, err
	}
	rep.LogLines, rep.WarnLines = lines-linesBefore, warn-warnBefore
	if rep.BadInput, err = testrig.ScrapeCounter(ctx, p.admin, "kproxy_bad_input_total"); err != nil || !cfg.PerPattern {
		return rep, err
	}
	rep.Patterns, err = measurePatterns(ctx, p, cfg)
	return rep, err
}

// measurePatterns measures each pattern alone (measurePattern).
func measurePatterns(ctx context.Context, p *devProc, cfg MeasureConfig) ([]PatternReport, error) {
	var out []PatternReport
	for _, name := range Patterns() {
		tcfg := cfg.Traffic
		tcfg.Addr, tcfg.Patterns, tcfg.Idle = p.addr, []string{name}, 0
		pr, err := measurePattern(ctx, p, tcfg, cfg.Duration, cmp.Or(cfg.Settle, 20*time.Second))
		if err != nil {
			return out, fmt.Errorf("pattern %s: %w", name, err)
		}
		pr.Name = name
		out = append(out, pr)
	}
	return out, nil
}

// steadyProducer is the well-behaved client beside the hostile ones: one
// record per tick, counting what was acknowledged and keeping the first
// error.
type steadyProducer struct {
	produced int64 // read after run returns
	acked    atomic.Int64
	firstErr atomic.Pointer[error]
}

// run produces until ticks ends; sends use sendCtx, which outlives ticks so
// the records in flight can still be acknowledged.
func (s *steadyProducer) run(ticks, sendCtx context.Context, cl *kgo.Client, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ticks.Done():
			return
		case <-tick.C:
		}
		s.produced++
		cl.Produce(sendCtx, &kgo.Record{Value: []byte(strconv.FormatInt(s.produced, 10))}, func(_ *kgo.Record, err error) {
			if err != nil {
				s.firstErr.CompareAndSwap(nil, &err)
				return
			}
			s.acked.Add(1)
		})
	}
}

// measurePattern runs one pattern for d, sampling the proxy, then waits
// settle and samples it again.
func measurePattern(ctx context.Context, p *devProc, tcfg Config, d, settle time.Duration) (PatternReport, error) {
	var pr PatternReport
	sample := func() (int64, int64, error) {
		r, err := rss(p.pid())
		if err != nil {
			return 0, 0, err
		}
		h, err := testrig.ScrapeCounter(ctx, p.admin, "go_gc_heap_live_bytes")
		return r, int64(h), err
	}
	bad0, err := testrig.ScrapeCounter(ctx, p.admin, "kproxy_bad_input_total")
	if err != nil {
		return pr, err
	}
	if pr.RSSBefore, pr.HeapBefore, err = sample(); err != nil {
		return pr, err
	}
	pr.RSSPeak, pr.HeapPeak = pr.RSSBefore, pr.HeapBefore
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(tctx, tcfg)
	}()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tick.C:
			if r, h, err := sample(); err == nil {
				pr.RSSPeak, pr.HeapPeak = max(pr.RSSPeak, r), max(pr.HeapPeak, h)
			}
		}
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return pr, ctx.Err()
	}
	if pr.RSSAfter, pr.HeapAfter, err = sample(); err != nil {
		return pr, err
	}
	bad, err := testrig.ScrapeCounter(ctx, p.admin, "kproxy_bad_input_total")
	pr.BadInput = bad - bad0
	return pr, err
}

func samplePeak(ctx context.Context, pid int, peak *atomic.Int64) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n, err := rss(pid); err == nil && n > peak.Load() {
			peak.Store(n)
		}
	}
}

// rss is the resident set size of process pid, from /proc.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in process status")
}

// countLog counts the log's lines and those at WARN or ERROR.
func countLog(path string) (lines, warn int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines++
		if l := sc.Bytes(); bytes.Contains(l, []byte("level=WARN")) || bytes.Contains(l, []byte("level=ERROR")) {
			warn++
		}
	}
	return lines, warn, sc.Err()
}

// devProc is a `kproxy dev` subprocess.
type devProc struct {
	*testrig.Proc
	addr, admin string
	logPath     string
}

func startDev(ctx context.Context, bin, dir string) (*devProc, error) {
	addrs, err := testrig.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	p := &devProc{addr: addrs[0], admin: addrs[1], logPath: filepath.Join(dir, "kproxy.log")}
	p.Proc = testrig.NewProc(testrig.Spec{
		Name: "kproxy dev", Path: bin, LogPath: p.logPath, Ready: "cluster is up",
		Args: []string{"dev", "--listen", p.addr, "--admin", p.admin, "--data-dir", filepath.Join(dir, "data")},
	})
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.Start(sctx); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *devProc) pid() int { return p.Pid() }

func (p *devProc) stop() { _ = p.Stop(15 * time.Second) }
