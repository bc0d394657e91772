// Package scale is `make scale`: it runs `kproxy etcd`, 3 stub brokers and
// 2 proxies as separate processes for each partition count asked for and
// measures a cold start that produces once to every partition, etcd's
// transaction rate and size, lease session losses, the takeover of a killed
// broker's third of the partitions, the proxies' memory, Metadata latency
// and route convergence; then it simulates many brokers straight in etcd to
// show the proxies' watch and table at that size. It writes docs/scale.md
// only when asked (Config.Markdown). Its limit: one machine, so every
// figure includes whatever else the machine runs; the report says the load.
package scale

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kproxy/kproxy/bench/harness"
	"github.com/kproxy/kproxy/testkit/progress"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Config is what scalerun's flags set.
type Config struct {
	Repo       string // module root, where kproxy is built
	Sizes      []int  // partition counts, one fresh cluster each
	SimBrokers int    // simulated brokers (0: no simulation)
	// SimPartitions is the simulation's partition count.
	SimPartitions      int
	LeaseTTL           time.Duration // brokers' lease TTL
	DeliveryTimeout    time.Duration // the cold-start producer's per-record bound
	ConvergenceSamples int
	Quick              bool   // a smoke run: labelled so in the report
	Markdown           string // report path ("" writes none)
	Command            string
	KeepDir            bool
	Logger             *slog.Logger
	Progress           *progress.Printer // nil: no progress lines
}

// Defaults are `make scale`'s settings; Quick are those of -quick.
var (
	DefaultSizes = []int{10_000, 30_000, 100_000}
	QuickSizes   = []int{2_000}
)

type runner struct {
	cfg    Config
	dir    string
	kproxy string
	steps  int // phases reported so far, for progress
}

// phasesPerSize is how many times size reports a phase.
const phasesPerSize = 4

// at reports a phase of the run: the phases count as equal parts of it, so
// "remaining" is a rough estimate (a cold start takes longer than a kill).
func (r *runner) at(stage string, round int) {
	total := len(r.cfg.Sizes) * phasesPerSize
	if r.cfg.SimBrokers > 0 {
		total++
	}
	done := float64(r.steps) / float64(max(total, 1))
	r.steps++
	r.cfg.Progress.Report(progress.Position{Stage: stage, Round: round, Rounds: len(r.cfg.Sizes), Done: done})
}

// Run measures every size and the simulation, then writes the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseTTL <= 0 || cfg.DeliveryTimeout <= 0 || cfg.ConvergenceSamples <= 0 {
		return nil, fmt.Errorf("scale: lease TTL, delivery timeout and convergence samples must be positive")
	}
	dir, err := os.MkdirTemp("", "kproxy-scale-")
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	keep := cfg.KeepDir
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	r := &runner{cfg: cfg, dir: dir, kproxy: filepath.Join(dir, "kproxy")}
	rep := newReport(cfg)
	started := time.Now()
	cfg.Logger.Info("scale: build", "pkg", testrig.KproxyPkg)
	if err := testrig.Build(ctx, cfg.Repo, testrig.Target{Pkg: testrig.KproxyPkg, Out: r.kproxy}); err != nil {
		return nil, err
	}
	for i, n := range cfg.Sizes {
		res, err := r.size(ctx, n, i+1)
		if res.TakeoverErr != "" {
			keep = true // its logs say why
		}
		if err != nil {
			keep = true
			return nil, fmt.Errorf("%d partitions: %w (logs in %s)", n, err, dir)
		}
		rep.Sizes = append(rep.Sizes, res)
	}
	if cfg.SimBrokers > 0 {
		r.at(fmt.Sprintf("simulation of %d brokers", cfg.SimBrokers), 0)
		res, err := r.simulate(ctx, cfg.SimBrokers, cfg.SimPartitions)
		if err != nil {
			keep = true
			return nil, fmt.Errorf("simulation: %w (logs in %s)", err, dir)
		}
		rep.Sim = &res
	}
	if keep {
		cfg.Logger.Info("scale: work directory kept", "dir", dir)
	}
	rep.Elapsed = time.Since(started).Round(time.Second).String()
	rep.LoadEnd = harness.LoadAverage()
	rep.evaluate(cfg.LeaseTTL)
	if cfg.Markdown != "" {
		if err := rep.WriteMarkdown(cfg.Markdown); err != nil {
			return nil, err
		}
	}
	return rep, nil
}
