// Command ksoak runs the soak of issue 20 (testkit/soak) and writes its
// report and plot: `make soak` (SOAK=30m by default; SOAK=5m for a short
// run, labelled as such in the report).
//
//	go run ./testkit/soak/cmd/ksoak -duration 30m -docs docs/soak.md
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kproxy/kproxy/testkit/soak"
	"github.com/kproxy/kproxy/testkit/testrig"
	"github.com/kproxy/kproxy/testkit/toolcli"
)

func main() {
	dur := flag.Duration("duration", 30*time.Minute, "the whole run: baseline, hostile phase, cool-down")
	out := toolcli.DocsFlag(flag.CommandLine, "the report, and the plot next to it as <name>.png", "make soak")
	every := flag.Duration("every", 10*time.Second, "sampling interval")
	flag.Parse()
	if err := run(*dur, *every, *out); err != nil {
		fmt.Fprintln(os.Stderr, "ksoak:", err)
		os.Exit(1)
	}
}

func run(dur, every time.Duration, out string) error {
	ctx, stop := toolcli.Context()
	defer stop()
	dir, err := os.MkdirTemp("", "ksoak")
	if err != nil {
		return err
	}
	if os.Getenv("KSOAK_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("keeping", dir)
	}
	bin := filepath.Join(dir, "kproxy")
	if err := testrig.Build(ctx, "", testrig.Target{Pkg: testrig.KproxyPkg, Out: bin}); err != nil {
		return err
	}
	res, err := soak.Run(ctx, soak.Config{Kproxy: bin, Dir: dir, Duration: dur, Every: every,
		Log: func(f string, a ...any) { fmt.Printf(time.Now().UTC().Format("15:04:05 ")+f+"\n", a...) }})
	if err != nil {
		return err
	}
	t := res.Judge()
	fmt.Printf("RSS %d -> %d MiB (%+.1f%%), errors %d/%d, p99 %.1f -> %.1f ms (%.2fx)\n",
		t.RSSWarm>>20, t.RSSEnd>>20, 100*t.RSSGrowth, t.ProduceErrs, t.ConsumeErr,
		float64(t.BaseP99.Microseconds())/1000, float64(t.HostileP99.Microseconds())/1000, t.P99Ratio)
	if out == "" {
		fmt.Println("no report written (-docs names where)")
		return nil
	}
	png := strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	if err := res.WritePlot(png); err != nil {
		return err
	}
	cmd := fmt.Sprintf("make soak SOAK=%v", dur)
	if err := os.WriteFile(out, []byte(res.Markdown(filepath.Base(png), cmd, dur < 30*time.Minute)), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", out, png)
	return nil
}
