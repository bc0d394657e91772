// Command zonesrun is `make zones`: it runs the zone-routing scenario
// (bench/zones) from the repository root and writes docs/zones.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kproxy/kproxy/bench/zones"
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
	flag.StringVar(&cfg.Markdown, "md", "docs/zones.md", "report path (empty: none)")
	flag.BoolVar(&cfg.KeepDir, "keep", false, "keep the work directory (process logs)")
	flag.Parse()
	cfg.Command = "make zones"
	if len(os.Args) > 1 {
		cfg.Command = "go run ./bench/cmd/zonesrun " + strings.Join(os.Args[1:], " ")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := zones.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zonesrun:", err)
		os.Exit(1)
	}
	for _, t := range rep.Targets {
		fmt.Printf("%-50s %-7s %s (goal %s)\n", t.Name, t.Status, t.Figure, t.Goal)
	}
	fmt.Printf("report: %s (%s)\n", cfg.Markdown, rep.Elapsed)
}
