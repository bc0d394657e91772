// Command scalerun is `make scale`: it runs the scale harness (bench/scale)
// from the repository root; with -docs (the make target passes
// docs/scale.md) it writes the report there.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench/scale"
	"github.com/kproxy/kproxy/testkit/progress"
	"github.com/kproxy/kproxy/testkit/toolcli"
)

func main() {
	cfg := scale.Config{}
	sizes := flag.String("sizes", "10000,30000,100000", "comma-separated partition counts, one fresh cluster each")
	flag.StringVar(&cfg.Repo, "repo", ".", "repository root (module github.com/kproxy/kproxy)")
	flag.BoolVar(&cfg.Quick, "quick", false, "smoke run: 2,000 partitions and 100 simulated brokers with 2,000 partitions")
	flag.IntVar(&cfg.SimBrokers, "sim-brokers", 1000, "simulated brokers (0: no simulation)")
	flag.IntVar(&cfg.SimPartitions, "sim-partitions", 100_000, "partitions of the simulation")
	flag.DurationVar(&cfg.LeaseTTL, "lease-ttl", 10*time.Second, "brokers' etcd lease TTL")
	flag.DurationVar(&cfg.DeliveryTimeout, "delivery-timeout", 5*time.Minute, "the cold-start producer's delivery timeout per record")
	flag.IntVar(&cfg.ConvergenceSamples, "convergence-samples", 50, "owner moves timed for route convergence")
	docs := toolcli.DocsFlag(flag.CommandLine, "the report", "make scale")
	flag.BoolVar(&cfg.KeepDir, "keep", false, "keep the work directory (process logs)")
	flag.Parse()
	cfg.Markdown = *docs
	list := *sizes
	if cfg.Quick {
		list = "2000"
		cfg.SimBrokers, cfg.SimPartitions = min(cfg.SimBrokers, 100), 2000
		cfg.ConvergenceSamples = min(cfg.ConvergenceSamples, 20)
	}
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "scalerun: -sizes: %q is not a positive count\n", s)
			os.Exit(2)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	cfg.Command = toolcli.Command("make scale", "./bench/cmd/scalerun", os.Args[1:])
	cfg.Progress = progress.New(os.Stdout, "scale", 10*time.Second, nil)
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := toolcli.Context()
	defer stop()
	rep, err := scale.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalerun:", err)
		os.Exit(1)
	}
	for _, t := range rep.Targets {
		fmt.Printf("%-55s %-12s %s (goal %s)\n", t.Name, t.Status, t.Figure, t.Goal)
	}
	fmt.Printf("report: %s (%s)\n", cmp.Or(cfg.Markdown, "none written (-docs)"), rep.Elapsed)
}
