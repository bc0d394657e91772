package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// runSpec is one kbench invocation, the same for every side.
type runSpec struct {
	cmd  string   // produce, consume or e2e
	args []string // kbench flags other than the side's
	// warmup and window, when window > 0, are the run's unmeasured start
	// and measured window: process CPU is sampled at their edges. With
	// window 0, CPU covers the whole run.
	warmup, window time.Duration
	// limit bounds the whole run.
	limit time.Duration
}

// sample is one run of one side.
type sample struct {
	side    string
	result  load.Result
	cpu     procCPU
	command string
}

// startKbench starts one kbench run; its result line is on stdout.
func (h *Harness) startKbench(ctx context.Context, name string, args []string) (*testrig.Proc, error) {
	p := testrig.NewProc(testrig.Spec{Name: name, Path: h.kbench, Args: args, CaptureStdout: true,
		LogPath: filepath.Join(h.dir, name+".log"), CPUs: h.cluster.loadCPUs})
	return p, p.Start(ctx)
}

// runKbench runs spec against s once.
func (h *Harness) runKbench(ctx context.Context, s side, spec runSpec) (sample, error) {
	args := append(append([]string{spec.cmd}, s.args()...), spec.args...)
	p, err := h.startKbench(ctx, "kbench", args)
	if err != nil {
		return sample{}, err
	}
	defer p.Kill() // no-op once it has exited
	start := time.Now()
	cpuAt := func(at time.Time) (procCPU, error) {
		if err := sleepUntil(ctx, at); err != nil {
			return procCPU{}, err
		}
		c, err := h.cluster.cpu()
		if err != nil {
			return c, err
		}
		c.clients, err = cpuTime(p.Pid())
		return c, err
	}
	var before, after procCPU
	if spec.window > 0 {
		if before, err = cpuAt(start.Add(spec.warmup)); err != nil {
			return sample{}, err
		}
		if after, err = cpuAt(start.Add(spec.warmup + spec.window)); err != nil {
			return sample{}, err
		}
	} else if before, err = h.cluster.cpu(); err != nil {
		return sample{}, err
	}
	lineCtx, cancel := context.WithTimeout(ctx, spec.limit)
	defer cancel()
	line, err := p.ReadLine(lineCtx)
	if err != nil {
		return sample{}, fmt.Errorf("kbench %s on %s: %w", spec.cmd, s.name, err)
	}
	<-p.Done()
	if err := p.Err(); err != nil {
		return sample{}, fmt.Errorf("kbench %s on %s: %w: %s", spec.cmd, s.name, err, p.Tail())
	}
	if spec.window == 0 {
		if after, err = h.cluster.cpu(); err != nil {
			return sample{}, err
		}
		after.clients = p.CPUUsed() // the whole run: before counted none
	}
	var res load.Result
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return sample{}, fmt.Errorf("kbench %s on %s: result %q: %w", spec.cmd, s.name, line, err)
	}
	h.cfg.Logger.Info("run", "cmd", spec.cmd, "side", s.name, "records/s", int64(res.RecordsPerSec),
		"MB/s", fmt.Sprintf("%.2f", res.MBPerSec), "p50us", res.Latency.P50, "p99us", res.Latency.P99,
		"errors", res.Errors)
	return sample{side: s.name, result: res, cpu: after.sub(before), command: "kbench " + strings.Join(args, " ")}, nil
}

// roundPlan says how a scenario's rounds run.
type roundPlan struct {
	spec   func(round int) runSpec
	before func(ctx context.Context, round int) error // nil: nothing
	// minRounds, if more than Config.Rounds, is how many rounds run: for a
	// ratio whose target sits within the noise of fewer.
	minRounds int
}

// samePlan runs spec in every round with no preparation.
func samePlan(spec runSpec) roundPlan {
	return roundPlan{spec: func(int) runSpec { return spec }}
}

// runRounds runs the plan for every side, Config.Rounds times (or
// plan.minRounds), so that
// drift of the shared machine hits every side alike: odd rounds run the
// sides in reverse order (over two rounds every side has the same mean
// position), and every second round the order also rotates.
func (h *Harness) runRounds(ctx context.Context, sides []string, plan roundPlan) (map[string][]sample, error) {
	out := make(map[string][]sample)
	rounds := max(h.cfg.Rounds, plan.minRounds)
	for r := range rounds {
		h.at(h.scenario, r+1, rounds)
		if plan.before != nil {
			if err := plan.before(ctx, r); err != nil {
				return nil, err
			}
		}
		spec := plan.spec(r)
		for _, name := range roundOrder(sides, r) {
			s, err := h.runKbench(ctx, h.cluster.side(name), spec)
			if err != nil {
				return nil, err
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

// roundOrder is the order of sides in round r (see runRounds).
func roundOrder(sides []string, r int) []string {
	n := len(sides)
	out := make([]string, n)
	for i := range n {
		out[i] = sides[(i+r/2)%n]
	}
	if r%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// SideResult is one side's figures in a scenario, over every round.
type SideResult struct {
	Side          string       `json:"side"`
	Runs          int          `json:"runs"`
	Records       int64        `json:"records"`
	Bytes         int64        `json:"bytes"`
	Seconds       float64      `json:"seconds"`
	RecordsPerSec float64      `json:"records_per_sec"`
	MBPerSec      float64      `json:"mb_per_sec"`
	Latency       load.Latency `json:"latency_us"`
	// RunRecordsPerSec is each run's rate, to show the spread.
	RunRecordsPerSec []float64 `json:"run_records_per_sec"`
	Errors           int64     `json:"errors"`
	FirstError       string    `json:"first_error,omitempty"`
	// CPU of the intermediary (proxy or relays) and of the brokers per MB
	// of payload (10^6 bytes of record values) moved in the measured runs.
	IntermediaryCPUMsPerMB float64 `json:"intermediary_cpu_ms_per_mb,omitempty"`
	// IntermediaryCores is the intermediary's CPU time over the measured
	// time: 1 is one core busy (tells whether it was CPU-bound).
	IntermediaryCores float64 `json:"intermediary_cores,omitempty"`
	BrokerCPUMsPerMB  float64 `json:"broker_cpu_ms_per_mb"`
	// ClientCPUMsPerMB is the load generator's CPU per MB; with the
	// others it says how much CPU the whole path takes per MB.
	ClientCPUMsPerMB float64 `json:"client_cpu_ms_per_mb"`
	// Cores is the CPU time of every process in the path (brokers,
	// intermediary, load generator) over the measured time.
	Cores   float64 `json:"cores"`
	Command string  `json:"command"`
}

// merge adds up a side's runs; latency histograms are merged, not averaged.
func merge(name string, runs []sample) (SideResult, error) {
	r := SideResult{Side: name, Runs: len(runs)}
	h := load.NewHistogram()
	var cpu procCPU
	for i, s := range runs {
		if i == 0 {
			r.Command = s.command
		}
		res := s.result
		r.Records += res.Records
		r.Bytes += res.Bytes
		r.Seconds += res.Seconds
		r.Errors += res.Errors
		r.RunRecordsPerSec = append(r.RunRecordsPerSec, round1(res.RecordsPerSec))
		if r.FirstError == "" {
			r.FirstError = res.FirstError
		}
		if res.Hist != "" {
			rh, err := load.DecodeHistogram(res.Hist)
			if err != nil {
				return r, err
			}
			mergeInto(h, rh)
		}
		cpu.proxy += s.cpu.proxy
		cpu.altProxy += s.cpu.altProxy
		cpu.relays += s.cpu.relays
		cpu.copyRelays += s.cpu.copyRelays
		cpu.brokers += s.cpu.brokers
		cpu.clients += s.cpu.clients
	}
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Seconds
	}
	r.Latency = load.Summarize(h)
	if mb := float64(r.Bytes) / 1e6; mb > 0 {
		inter := time.Duration(0)
		switch name {
		case sideProxy:
			inter = cpu.proxy
		case sideACL, sideNoValidation, sideEncrypted:
			inter = cpu.altProxy
		case sideRelay:
			inter = cpu.relays
		case sideCopyRelay:
			inter = cpu.copyRelays
		}
		if name != sideDirect {
			r.IntermediaryCPUMsPerMB = ms(inter) / mb
			if r.Seconds > 0 {
				r.IntermediaryCores = inter.Seconds() / r.Seconds
			}
		}
		r.BrokerCPUMsPerMB = ms(cpu.brokers) / mb
		r.ClientCPUMsPerMB = ms(cpu.clients) / mb
		if r.Seconds > 0 {
			r.Cores = (inter + cpu.brokers + cpu.clients).Seconds() / r.Seconds
		}
	}
	return r, nil
}

func mergeInto(dst, src *hdrhistogram.Histogram) {
	_ = dst.Merge(src) // same geometry: nothing is dropped
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func sleepUntil(ctx context.Context, at time.Time) error {
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
