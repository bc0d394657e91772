// Command zonesrun is `make zones`: it runs the zone-routing scenario
// (bench/zones) from the repository root; with -docs (the make target
// passes docs/zones.md) it writes the report there.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kproxy/kproxy/bench/zones"
	"github.com/kproxy/kproxy/testkit/toolcli"
)

func main() {
	cfg := zones.Config{}
	flag.StringVar(&cfg.Repo, "repo", ".", "repository root (module github.com/kproxy/kproxy)")
	flag.IntVar(&cfg.BrokersPerZone, "brokers-per-zone", 2, "stub brokers per zone (3 zones)")
	flag.Float64Var(&cfg.Rate, "rate", 500, "records/s of each zone's producer")
	flag.IntVar(&cfg.RecordSize, "record-size", 1000, "bytes per record")
	flag.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "unmeasured start of each phase")
	flag.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured window of each phase")
	flag.IntVar(&cfg.Rounds, "rounds", 5, "rounds; each routing mode runs once per round, order rotated (the latency target is the median of the rounds' ratios)")
	docs := toolcli.DocsFlag(flag.CommandLine, "the report", "make zones")
	flag.BoolVar(&cfg.KeepDir, "keep", false, "keep the work directory (process logs)")
	flag.Parse()
	cfg.Markdown = *docs
	cfg.Command = toolcli.Command("make zones", "./bench/cmd/zonesrun", os.Args[1:])
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := toolcli.Context()
	defer stop()
	rep, err := zones.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zonesrun:", err)
		os.Exit(1)
	}
	for _, t := range rep.Targets {
		fmt.Printf("%-50s %-7s %s (goal %s)\n", t.Name, t.Status, t.Figure, t.Goal)
	}
	fmt.Printf("report: %s (%s)\n", cmp.Or(cfg.Markdown, "none written (-docs)"), rep.Elapsed)
}
