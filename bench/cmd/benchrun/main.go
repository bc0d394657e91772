// Command benchrun is `make bench`: it runs the benchmark harness
// (bench/harness) from the repository root; with -docs (the make target
// passes docs/benchmarks.md) it writes the Markdown report there and the
// JSON report beside it.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench/harness"
	"github.com/kproxy/kproxy/testkit/progress"
	"github.com/kproxy/kproxy/testkit/toolcli"
)

func main() {
	cfg := harness.Config{}
	var only, proxyFlags string
	flag.StringVar(&cfg.Repo, "repo", ".", "repository root (module github.com/kproxy/kproxy)")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured window per run")
	flag.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured start per run")
	flag.IntVar(&cfg.Rounds, "rounds", 2, "rounds; every side runs once per round, order rotated")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run (default all): "+strings.Join(harness.Scenarios, ","))
	flag.DurationVar(&cfg.LeaseTTL, "lease-ttl", 10*time.Second, "brokers' etcd lease TTL")
	flag.IntVar(&cfg.ManyClients, "many-clients", 1000, "client connections of produce-1k-many")
	flag.IntVar(&cfg.IdleConns, "idle-conns", 10000, "idle connections of the memory scenario")
	flag.IntVar(&cfg.BufferBytes, "buffer-bytes", 64<<20, "records buffered over all clients of a saturating produce run")
	flag.IntVar(&cfg.ConvergenceSamples, "convergence-samples", 50, "owner changes timed for route convergence")
	flag.IntVar(&cfg.FailoverTrials, "failover-trials", 1, "failover trials (each takes about the lease TTL)")
	flag.BoolVar(&cfg.Profile, "profile", true, "profile the proxy during an extra produce and fetch run")
	flag.StringVar(&proxyFlags, "proxy-flags", "", "extra `kproxy serve` flags, space-separated (experiments)")
	flag.BoolVar(&cfg.KeepDir, "keep", false, "keep the work directory (process logs, profiles)")
	docs := toolcli.DocsFlag(flag.CommandLine, "the Markdown report, and the JSON report beside it as .json", "make bench")
	render := flag.Bool("render", false, "only rewrite the Markdown (and targets, findings) from the existing JSON report")
	flag.Parse()
	if *docs != "" {
		cfg.Markdown, cfg.JSON = *docs, strings.TrimSuffix(*docs, ".md")+".json"
	}
	if *render && *docs == "" {
		fmt.Fprintln(os.Stderr, "benchrun: -render rewrites the report -docs names")
		os.Exit(2)
	}
	if *render {
		if err := harness.Render(cfg.JSON, cfg.Markdown); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			os.Exit(1)
		}
		return
	}
	if only != "" {
		cfg.Only = strings.Split(only, ",")
	}
	cfg.ProxyFlags = strings.Fields(proxyFlags)
	cfg.Command = toolcli.Command("make bench", "./bench/cmd/benchrun", os.Args[1:])
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Progress = progress.New(os.Stdout, "bench", 10*time.Second, nil)
	if cfg.Rounds < 1 || cfg.Duration <= 0 {
		fmt.Fprintln(os.Stderr, "benchrun: -rounds must be >= 1 and -duration positive")
		os.Exit(2)
	}

	ctx, stop := toolcli.Context()
	defer stop()
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
	for _, t := range rep.Targets {
		fmt.Printf("%-40s %-8s %s (goal %s)\n", t.Name, t.Status, t.Figure, t.Goal)
	}
	fmt.Printf("report: %s (%s)\n", cmp.Or(cfg.Markdown+", "+cfg.JSON, "none written (-docs)"), rep.Elapsed)
}
