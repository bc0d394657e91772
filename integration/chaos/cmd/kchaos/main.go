// Command kchaos runs kproxy's fault suite (package chaos) and prints where
// its report is. It exits 0 when the run found no anomaly, 1 when it found
// some (or, with -mutation, when the fencing-disabled run found none), and 2
// when the suite itself could not run.
//
//	go run ./integration/chaos/cmd/kchaos -duration 5m -results results/
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kproxy/kproxy/integration/chaos"
	"github.com/kproxy/kproxy/integration/chaos/nemesis"
	"github.com/kproxy/kproxy/integration/chaos/workload"
	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/testkit/progress"
	"github.com/kproxy/kproxy/testkit/toolcli"
)

func main() {
	os.Exit(run())
}

// runFlags are the command line's settings beyond chaos.Options.
type runFlags struct {
	mutation time.Duration
	docs     string
	docsOnly bool
}

// parseFlags reads the command line into the suite's options.
func parseFlags() (chaos.Options, runFlags) {
	var (
		opt                chaos.Options
		rf                 runFlags
		faults             string
		mode               string
		verbose            bool
		seed               uint64
		brokerFlags, zones string
	)
	flag.DurationVar(&opt.Duration, "duration", 5*time.Minute, "how long faults run")
	flag.StringVar(&opt.Results, "results", "results", "folder for run folders (history, report, logs)")
	flag.Uint64Var(&seed, "seed", 0, "seed for targets and timings (0: from the clock)")
	flag.DurationVar(&opt.LeaseTTL, "lease-ttl", 3*time.Second, "brokers' lease TTL")
	flag.IntVar(&opt.Producers, "producers", 12, "producers, spread over the proxies")
	flag.Float64Var(&opt.Rate, "rate", 20, "sends per second per producer")
	flag.StringVar(&mode, "mode", string(workload.Mixed), "producers: idempotent, plain or mixed")
	flag.StringVar(&faults, "faults", "", "comma-separated fault rotation (default: all): "+kindList())
	flag.DurationVar(&opt.IntervalMin, "interval-min", 10*time.Second, "shortest fault cycle")
	flag.DurationVar(&opt.IntervalMax, "interval-max", 30*time.Second, "longest fault cycle")
	flag.BoolVar(&opt.DisableFencing, "unsafe-disable-fencing", false, "run the brokers with fencing disabled (the mutation); anomalies are then expected")
	flag.DurationVar(&rf.mutation, "mutation", 0, "after the run, also run this long with fencing disabled and require it to find lost writes or inconsistent offsets")
	flag.StringVar(&opt.Bin.Kproxy, "kproxy", "", "prebuilt kproxy binary, built with -tags kproxy_unsafe for the mutation run (default: go build, tagged)")
	flag.StringVar(&opt.Bin.EtcdMember, "etcdmember", "", "prebuilt etcdmember binary (default: go build)")
	flag.StringVar(&brokerFlags, "broker-flags", "", "extra flags for every broker, space-separated")
	flag.StringVar(&zones, "zones", "", "zone mode: comma-separated zones brokers and proxies are spread over (e.g. a,b,c: consumers set client.rack and read through zone-local brokers, mostly non-owners)")
	flag.BoolVar(&opt.KeepData, "keep-data", false, "keep etcd and store data of valid runs too (invalid runs always keep it)")
	flag.BoolVar(&rf.docsOnly, "docs-only", false, "only write -docs from the newest reports under -results; run nothing")
	flag.BoolVar(&verbose, "v", false, "log progress to stderr")
	docsFlag := toolcli.DocsFlag(flag.CommandLine, "the correctness page with this run's figures", "make chaos")
	flag.Parse()

	rf.docs = *docsFlag
	opt.Seed = seed
	opt.Mode = workload.Mode(mode)
	opt.BrokerArgs = strings.Fields(brokerFlags)
	if zones != "" {
		opt.Zones = strings.Split(zones, ",")
	}
	for _, f := range commalist.Split(faults) {
		opt.Faults = append(opt.Faults, nemesis.Kind(f))
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	opt.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opt.Progress = progress.New(os.Stdout, "chaos", 10*time.Second, nil)

	return opt, rf
}

func run() int {
	opt, rf := parseFlags()
	mutation, docs, docsOnly := rf.mutation, rf.docs, rf.docsOnly
	if docsOnly && docs == "" {
		fmt.Fprintln(os.Stderr, "kchaos: -docs-only needs -docs")
		return 2
	}
	if docsOnly {
		if err := chaos.WriteDocs(docs, opt.Results, nil, nil); err != nil {
			fmt.Fprintln(os.Stderr, "kchaos: docs:", err)
			return 2
		}
		fmt.Println("docs written:", docs)
		return 0
	}

	ctx, stop := toolcli.Context()
	defer stop()

	if opt.Bin.Kproxy == "" || opt.Bin.EtcdMember == "" {
		dir, err := os.MkdirTemp("", "kchaos-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "kchaos:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		if opt.Bin, err = chaos.Build(ctx, "", dir); err != nil {
			fmt.Fprintln(os.Stderr, "kchaos:", err)
			return 2
		}
	}

	opt.Name = "chaos"
	if opt.DisableFencing {
		opt.Name = "mutation"
	}
	rep, err := chaos.Run(ctx, opt)
	code := verdict(rep, err, opt.DisableFencing)
	var mut *chaos.Report
	if mutation > 0 && err == nil && ctx.Err() == nil {
		mopt := opt
		mopt.Name, mopt.DisableFencing, mopt.Duration = "mutation", true, mutation
		var merr error
		mut, merr = chaos.Run(ctx, mopt)
		code = max(code, verdict(mut, merr, true))
	}
	if docs != "" && err == nil && rep != nil {
		if derr := chaos.WriteDocs(docs, opt.Results, rep, mut); derr != nil {
			fmt.Fprintln(os.Stderr, "kchaos: docs:", derr)
		} else {
			fmt.Println("docs written:", docs)
		}
	}
	return code
}

// verdict prints a run's summary and returns its exit code.
func verdict(rep *chaos.Report, err error, mutation bool) int {
	if rep != nil {
		fmt.Print(rep.Summary())
		fmt.Println("results:", rep.Dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kchaos: run failed:", err)
		return 2
	}
	if mutation {
		if rep.MutationDetected() {
			fmt.Println("mutation detected: the checker sees what fencing prevents")
			return 0
		}
		fmt.Println("MUTATION NOT DETECTED: fencing disabled, yet no lost write or inconsistent offset")
		return 1
	}
	if !rep.Valid {
		return 1
	}
	return 0
}

func kindList() string {
	seen := map[nemesis.Kind]bool{}
	var out []string
	for _, k := range append(nemesis.AllKinds, nemesis.KillEtcd) {
		if !seen[k] {
			seen[k] = true
			out = append(out, string(k))
		}
	}
	return strings.Join(out, ", ")
}
