// Package harness runs kproxy's benchmark (`make bench`): it builds kproxy
// and kbench, starts etcd, stub brokers (memory store), one plain TCP relay
// per broker and the proxy as separate processes, and compares three ways
// to reach the same brokers in the same run, alternating between them:
// direct, through kproxy, and through the relays. It adds failover, route
// convergence, idle-connection memory, proxy CPU per MB and the routing
// table's lookup benchmark, checks the project's targets, and writes
// docs/benchmarks.md and docs/benchmarks.json.
package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kproxy/kproxy/testkit/progress"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Config is what benchrun's flags set.
type Config struct {
	Repo     string        // module root: where to build and run go test
	Duration time.Duration // measured window per run
	Warmup   time.Duration // unmeasured start per run
	Rounds   int           // each side runs once per round, order rotated
	Only     []string      // scenario ids to run; empty runs all
	LeaseTTL time.Duration // brokers' lease TTL (the failover target is TTL + 1 s)
	// ManyClients is the client count of produce-1k-many; IdleConns the
	// connection count of the memory scenario.
	ManyClients, IdleConns int
	ConvergenceSamples     int
	// BufferBytes is the produce buffer of a saturating run, spread over
	// its clients (kgo MaxBufferedRecords).
	BufferBytes    int
	FailoverTrials int
	// Profile takes a CPU profile of the proxy during an extra produce and
	// fetch run (not part of the figures) and puts its top in the report.
	Profile bool
	// ProxyFlags are extra `kproxy serve` flags, for experiments.
	ProxyFlags []string
	// KeepDir keeps the work directory (logs, profiles) after the run.
	KeepDir        bool
	Markdown, JSON string // output paths ("" skips)
	Command        string // how the run was started, for the report
	Logger         *slog.Logger
	// Progress gets a line per scenario and round (nil: none).
	Progress *progress.Printer
}

// Scenarios lists every scenario id, in run order.
var Scenarios = []string{
	"memory", "produce-1k", "latency-half-rate", "fetch", "produce-100b", "produce-1k-1conn", "produce-1k-many",
	"pinned-produce-1k", "pinned-latency-half-rate", "pinned-fetch", "pinned-produce-100b", "fetch-idle-broker", "route-convergence", "failover", "routing-lookup", "profile",
	"acl-produce-1k", "acl-fetch", "validation-produce-1k",
	"validation-produce-1k-gzip", "validation-produce-1k-snappy", "validation-produce-1k-lz4", "validation-produce-1k-zstd",
	"encryption-produce-1k", "encryption-fetch", kafscalePeerID,
	"serial-produce-1k-4p", "serial-produce-1k-16p", "serial-produce-1k-64p",
}

// Harness is one benchmark run.
type Harness struct {
	cfg     Config
	dir     string
	kproxy  string
	kbench  string
	cluster *Cluster
	report  *Report
	// scenario is the one running, for progress lines.
	scenario string
}

// Run runs the benchmark and writes the report files.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	nofile, err := raiseFileLimit()
	if err != nil {
		return nil, err
	}
	if need := uint64(cfg.IdleConns) + 1000; slices.Contains(cfg.selectedList(), "memory") && nofile < need {
		return nil, fmt.Errorf("open-file limit %d is below the %d the memory scenario needs; lower -idle-conns", nofile, need)
	}
	dir, err := os.MkdirTemp("", "kproxy-bench-")
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if !cfg.KeepDir {
		defer os.RemoveAll(dir)
	}
	h := &Harness{cfg: cfg, dir: dir, report: newReport(cfg)}
	h.report.Environment.OpenFileLimit = nofile
	started := time.Now()
	if err := h.build(ctx); err != nil {
		return nil, err
	}
	h.cluster, err = startCluster(ctx, clusterConfig{dir: dir, kproxy: h.kproxy, kbench: h.kbench, brokers: 3,
		leaseTTL: cfg.LeaseTTL, pprof: cfg.Profile, proxyFlags: cfg.ProxyFlags, logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("start cluster (logs in %s): %w", dir, err)
	}
	defer h.cluster.Close()
	h.report.Environment.EtcdData = "on disk (the work folder): every broker commit waits for etcd's fsync"
	if h.cluster.EtcdOnTmpfs {
		h.report.Environment.EtcdData = "on tmpfs (/dev/shm): broker commits do not wait for a disk's fsync, whose latency varies with whatever else the shared machine writes"
	}
	steps := []func(context.Context) error{
		// Memory first: a proxy that has carried traffic keeps freed heap, and
		// new connections would reuse it without growing RSS.
		h.memoryScenario, h.produceScenarios, h.serialScenarios, h.pinnedScenarios, h.idleBrokerScenario, h.convergenceScenario,
		h.failoverScenario, h.routingBench, h.aclScenarios, h.validationScenario, h.encryptionScenario, h.profile, h.kafscalePeerScenario,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, fmt.Errorf("%w (logs in %s)", err, dir)
		}
	}
	h.report.Elapsed = time.Since(started).Round(time.Second).String()
	h.report.Environment.LoadEnd = LoadAverage()
	h.report.evaluate(cfg)
	if err := h.report.write(cfg.Markdown, cfg.JSON); err != nil {
		return nil, err
	}
	return h.report, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	for _, id := range c.Only {
		if !slices.Contains(Scenarios, id) {
			return c, fmt.Errorf("unknown scenario %q (have %s)", id, strings.Join(Scenarios, ", "))
		}
	}
	return c, nil
}

func (c Config) selectedList() []string {
	if len(c.Only) == 0 {
		return Scenarios
	}
	return c.Only
}

// selected says whether any of ids is to run.
func (h *Harness) selected(ids ...string) bool {
	list := h.cfg.selectedList()
	for _, id := range ids {
		if slices.Contains(list, id) {
			return true
		}
	}
	return false
}

// build compiles kproxy and kbench into the work directory.
func (h *Harness) build(ctx context.Context) error {
	h.kproxy = filepath.Join(h.dir, "kproxy")
	h.kbench = filepath.Join(h.dir, "kbench")
	h.cfg.Logger.Info("build", "pkgs", []string{testrig.KproxyPkg, testrig.KbenchPkg})
	if err := testrig.Build(ctx, h.cfg.Repo, testrig.Target{Pkg: testrig.KproxyPkg, Out: h.kproxy},
		testrig.Target{Pkg: testrig.KbenchPkg, Out: h.kbench}); err != nil {
		return err
	}
	h.report.Environment.Commit = gitCommit(ctx, h.cfg.Repo)
	return nil
}

// profile takes a CPU profile of the proxy during one extra produce run
// and one extra fetch run and keeps the top functions for the report.
func (h *Harness) profile(ctx context.Context) error {
	if !h.cfg.Profile || !h.selected("profile") || !h.selected("produce-1k") {
		return nil
	}
	h.cfg.Logger.Info("scenario", "id", "profile")
	h.at("profile", 0, 0)
	secs := max(int(h.cfg.Duration/time.Second)-1, 1)
	for _, pr := range []struct {
		name string
		spec runSpec
	}{
		{"produce-1k", h.produceSpec(produceArgs{topic: "bench-prof", recordSize: 1024, producers: 8, clients: 8})},
		{"fetch", consumeSpec("bench-prof", h.cfg.Duration)},
	} {
		if pr.name == "produce-1k" {
			if err := h.freshTopic(ctx, "bench-prof"); err != nil {
				return err
			}
		}
		path := filepath.Join(h.dir, "proxy-"+pr.name+".pprof")
		errc := make(chan error, 1)
		// A fetch run has no warm-up and may read everything within its first
		// second: profiled from its start, or the profile can be empty.
		delay := h.cfg.Warmup
		if pr.spec.cmd == "consume" {
			delay = 0
		}
		go func() { errc <- h.fetchProfile(ctx, path, secs, delay) }() // joined below
		if _, err := h.runKbench(ctx, h.cluster.side(sideProxy), pr.spec); err != nil {
			<-errc
			return err
		}
		if err := <-errc; err != nil {
			return err
		}
		top, err := pprofTop(ctx, h.cfg.Repo, h.kproxy, path)
		if err != nil {
			return err
		}
		shares, err := profileShares(ctx, h.cfg.Repo, h.kproxy, path)
		if err != nil {
			return err
		}
		h.report.Profiles = append(h.report.Profiles, Profile{Run: pr.name, Seconds: secs, Top: top, Shares: shares})
	}
	return nil
}

func (h *Harness) fetchProfile(ctx context.Context, path string, secs int, delay time.Duration) error {
	if err := sleepUntil(ctx, time.Now().Add(delay)); err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", h.cluster.proxy.AdminAddr, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: time.Duration(secs+30) * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("proxy profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy profile: %s (is --pprof on?)", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("save proxy profile: %w", err)
	}
	return nil
}

// pprofTop is `go tool pprof -top` of a profile, cumulative order cut short.
func pprofTop(ctx context.Context, repo, bin, path string) (string, error) {
	var lines []string
	for _, order := range [][]string{{"-top"}, {"-top", "-cum"}} {
		args := append(append([]string{"tool", "pprof"}, order...), "-nodecount=20", bin, path)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("go tool pprof: %w", err)
		}
		lines = append(lines, strings.TrimSpace(string(out)))
	}
	return strings.Join(lines, "\n\n"), nil
}

func gitCommit(ctx context.Context, repo string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	st := exec.CommandContext(ctx, "git", "status", "--porcelain")
	st.Dir = repo
	if dirty, err := st.Output(); err == nil && len(dirty) > 0 {
		commit += " (with uncommitted changes)"
	}
	return commit
}

// CPUModel is the machine's CPU model name.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}
