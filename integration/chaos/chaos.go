// Package chaos is kproxy's Jepsen-style fault suite: it runs a real
// cluster as separate processes (3 etcd members, 3 brokers sharing a store
// folder, 2 proxies), drives it with producers and consumers through both
// proxies while a nemesis kills, pauses and cuts off its parts, heals it,
// reads every partition back through each proxy and checks the history for
// the anomalies kproxy exists to prevent (package checker).
//
// The promise: Run ends every process it started, also on failure or
// cancellation; every phase is bounded in time; and the report it writes
// names each anomaly with its evidence. Run returns an error only when the
// suite itself could not run; anomalies are in the report.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/checker"
	"github.com/kproxy/kproxy/integration/chaos/cluster"
	"github.com/kproxy/kproxy/integration/chaos/history"
	"github.com/kproxy/kproxy/integration/chaos/nemesis"
	"github.com/kproxy/kproxy/integration/chaos/workload"
	"github.com/kproxy/kproxy/testkit/progress"
)

// Options configure a run. Zero values take the defaults in brackets.
type Options struct {
	Name     string        // run name, part of the run folder [chaos]
	Results  string        // folder that gets one sub-folder per run [results]
	Bin      Binaries      // prebuilt programs [built into the run folder]
	Duration time.Duration // how long faults run [5m]
	Seed     uint64        // [time-based]

	LeaseTTL       time.Duration // [3s]
	DisableFencing bool          // the mutation: brokers commit without the compare
	BrokerArgs     []string
	// Zones, if set, is the zone mode: brokers and proxies are spread over
	// these zones (--rack, --zone, --fetch-from zone) and consumers set
	// client.rack to their proxy's zone, so they read through zone-local
	// brokers, most of them not the partitions' owners.
	Zones []string

	Producers  int           // [12]
	Partitions int32         // [8]
	Rate       float64       // sends per second per producer [20]
	Mode       workload.Mode // [mixed]

	Faults                   []nemesis.Kind // [nemesis.AllKinds]
	IntervalMin, IntervalMax time.Duration  // fault cycle [10s, 30s]

	// KeepData keeps etcd's and the store's data in the run folder even
	// when the run is valid (invalid runs always keep it).
	KeepData bool

	Logger *slog.Logger // progress; the run's own log file gets everything too
	// Progress gets a line per phase and fault cycle (nil: none).
	Progress *progress.Printer
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "chaos"
	}
	if o.Results == "" {
		o.Results = "results"
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 3 * time.Second
	}
	if o.Partitions == 0 {
		o.Partitions = 8
	}
	if o.Producers == 0 {
		o.Producers = 12
	}
	if o.Mode == "" {
		o.Mode = workload.Mixed
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run runs the suite once and writes history.jsonl, report.json and
// summary.txt into a new folder under Options.Results.
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt = opt.withDefaults()
	dir := filepath.Join(opt.Results, fmt.Sprintf("%s-%s", opt.Name, time.Now().UTC().Format("20060102T150405Z")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make run folder: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "kchaos.log"))
	if err != nil {
		return nil, fmt.Errorf("open run log: %w", err)
	}
	defer logFile.Close()
	fileLog := slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})
	log := slog.New(teeHandler{fileLog, opt.Logger.Handler()})
	r := &runner{opt: opt, dir: dir, log: log, fileLog: slog.New(fileLog), report: &Report{Name: opt.Name, Dir: dir, Seed: opt.Seed,
		Started: time.Now().UTC(), FaultDuration: opt.Duration.String(), LeaseTTL: opt.LeaseTTL.String(),
		DisableFencing: opt.DisableFencing, Producers: opt.Producers, Partitions: opt.Partitions, Mode: string(opt.Mode), Zones: opt.Zones}}
	err = r.run(ctx)
	r.report.Elapsed = time.Since(r.report.Started).Round(time.Millisecond).String()
	if werr := r.writeReport(); werr != nil {
		err = errors.Join(err, werr)
	}
	if err == nil && r.report.Valid && !opt.KeepData {
		r.removeData()
	}
	return r.report, err
}

// removeData deletes the cluster's data (etcd members, the store, binaries)
// from a run folder, keeping history, report and logs. Invalid runs keep
// everything as evidence.
func (r *runner) removeData() {
	paths, _ := filepath.Glob(filepath.Join(r.dir, "etcd-*"))
	for _, p := range append(paths, filepath.Join(r.dir, "store"), filepath.Join(r.dir, "bin")) {
		if err := os.RemoveAll(p); err != nil {
			r.log.Warn("remove run data", "path", p, "err", err)
		}
	}
}

type runner struct {
	opt Options
	dir string
	log *slog.Logger
	// fileLog goes to the run's log file only: relays and processes are
	// chatty during faults.
	fileLog *slog.Logger
	report  *Report
	rec     *history.Recorder
}

func (r *runner) run(ctx context.Context) error {
	bin := r.opt.Bin
	if bin.Kproxy == "" || bin.EtcdMember == "" {
		r.log.Info("building binaries")
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		b, err := Build(bctx, "", filepath.Join(r.dir, "bin"))
		cancel()
		if err != nil {
			return err
		}
		bin = b
	}
	histFile, err := os.Create(filepath.Join(r.dir, "history.jsonl"))
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	defer histFile.Close()
	r.rec = history.NewRecorder(histFile, nil)
	defer r.rec.Flush()

	r.log.Info("starting cluster", "dir", r.dir, "disable_fencing", r.opt.DisableFencing)
	r.at("start cluster", 0, 0)
	cl, err := cluster.Start(ctx, cluster.Config{
		Dir: r.dir, Kproxy: bin.Kproxy, EtcdMember: bin.EtcdMember, LeaseTTL: r.opt.LeaseTTL,
		Partitions: r.opt.Partitions, DisableFencing: r.opt.DisableFencing, BrokerArgs: r.opt.BrokerArgs,
		Zones: r.opt.Zones, Logger: r.fileLog,
	})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer cl.Close()
	return r.drive(ctx, cl)
}

// drive runs the workload and the faults, heals, reads back and checks.
func (r *runner) drive(ctx context.Context, cl *cluster.Cluster) error {
	const topic = "kchaos"
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err := workload.EnsureTopic(tctx, cl.ProxyAddrs()[0], topic, r.opt.Partitions)
	cancel()
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	counters := cl.WatchCounters(watchCtx, time.Second)
	defer func() { stopWatch(); counters.Wait() }()

	w, err := workload.Start(workload.Config{
		Proxies: cl.ProxyAddrs(), Zones: cl.ProxyZones(), Topic: topic, Partitions: r.opt.Partitions, Producers: r.opt.Producers,
		Mode: r.opt.Mode, Rate: r.opt.Rate, Seed: r.opt.Seed, Recorder: r.rec, Logger: r.log,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	r.log.Info("workload running", "workload", w.String())
	r.at("workload", 0, 0)
	if err := sleep(ctx, 3*time.Second); err != nil { // let every partition get an owner first
		return err
	}

	nem, err := nemesis.New(nemesis.Config{
		Cluster: cl, Recorder: r.rec, Topic: topic, Partitions: r.opt.Partitions, Kinds: r.opt.Faults,
		IntervalMin: r.opt.IntervalMin, IntervalMax: r.opt.IntervalMax, LeaseTTL: r.opt.LeaseTTL,
		Seed: r.opt.Seed, Logger: r.log,
		Progress: func(cycle int, kind nemesis.Kind, left time.Duration) {
			r.at("faults: "+string(kind), cycle, left)
		},
	})
	if err != nil {
		return err
	}
	injected := nem.Run(ctx, r.opt.Duration)
	r.log.Info("faults done", "injected", injected)
	return r.finish(ctx, cl, w, topic, counters)
}

// finish heals everything, lets the cluster settle, reads back and checks.
func (r *runner) finish(ctx context.Context, cl *cluster.Cluster, w *workload.Workload, topic string, counters *cluster.Counters) error {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	err := cl.Heal(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("heal: %w", err)
	}
	healed := r.rec.Elapsed()
	r.log.Info("healed; producing through recovery", "for", 2*r.opt.LeaseTTL)
	r.at("recovery", 0, 0)
	if err := sleep(ctx, 2*r.opt.LeaseTTL); err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	w.Drain(dctx)
	cancel()
	r.log.Info("producers drained; waiting before the final read", "for", 2*r.opt.LeaseTTL+time.Second)
	if err := sleep(ctx, 2*r.opt.LeaseTTL+time.Second); err != nil {
		return err
	}
	r.at("final read and check", 0, 0)
	ferr := workload.FinalRead(ctx, r.rec, cl.ProxyAddrs(), topic, r.opt.Partitions, 60*time.Second)
	if ferr != nil {
		r.log.Warn("final read incomplete", "err", ferr) // the checker reports it as an anomaly
	}
	w.Stop()
	if err := r.rec.Flush(); err != nil {
		return err
	}
	ops := r.rec.Ops()
	r.report.fill(checker.Check(ops, checker.Options{}), ops, healed)
	totals, scrapeErrs := counters.Totals()
	r.report.Counters, r.report.ScrapeErrors = totals, scrapeErrs
	r.report.FencedCommits = counters.Fenced()
	return nil
}

func (r *runner) writeReport() error {
	b, err := json.MarshalIndent(r.report, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "report.json"), b, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return os.WriteFile(filepath.Join(r.dir, "summary.txt"), []byte(r.report.Summary()), 0o644)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// teeHandler sends records to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, rec slog.Record) error {
	var errs []error
	if t.a.Enabled(ctx, rec.Level) {
		errs = append(errs, t.a.Handle(ctx, rec.Clone()))
	}
	if t.b.Enabled(ctx, rec.Level) {
		errs = append(errs, t.b.Handle(ctx, rec.Clone()))
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}

func (t teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{t.a.WithGroup(g), t.b.WithGroup(g)}
}
