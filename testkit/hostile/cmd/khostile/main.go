// Command khostile measures `kproxy dev` under the hostile traffic of issues
// 12 and 20 and prints the figures: resident memory before, at its peak and
// after, the log lines written, and what a producer running alongside saw;
// then, unless -per-pattern=false, each pattern alone with RSS and heap
// before, at their peak while it ran, and -settle after it stopped.
//
//	go build -o bin/kproxy ./cmd/kproxy && go run ./testkit/hostile/cmd/khostile -kproxy bin/kproxy
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/kproxy/kproxy/testkit/hostile"
)

func main() {
	bin := flag.String("kproxy", "bin/kproxy", "kproxy binary")
	dur := flag.Duration("duration", 20*time.Second, "how long the traffic runs")
	attackers := flag.Int("attackers", 16, "connections sending bad input at once")
	idle := flag.Int("idle", 2000, "idle connections held open")
	seed := flag.Uint64("seed", 1, "seed of the random traffic")
	perPattern := flag.Bool("per-pattern", true, "then run each pattern alone for -duration and report memory around it")
	settle := flag.Duration("settle", 20*time.Second, "how long after each pattern its 'after' figures are taken")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "khostile")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("KHOSTILE_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("keeping", dir)
	}
	rep, err := hostile.Measure(ctx, hostile.MeasureConfig{
		Binary: *bin, Dir: dir, Duration: *dur, PerPattern: *perPattern, Settle: *settle,
		Traffic: hostile.Config{Attackers: *attackers, Idle: *idle, Seed: *seed},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "khostile:", err)
		os.Exit(1)
	}
	fmt.Println(rep)
}
