package harness

import (
	"context"
	"fmt"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// Pinning: on two shared cores the direct side already keeps both busy, so
// a proxy's ratio to direct says more about the machine than the proxy. The
// pinned runs give the intermediary (the proxy or the relays) CPU 1 alone
// and put etcd, the brokers and the load generator on CPU 0; the direct
// side runs the same with CPU 1 idle.
const (
	intermediaryCPU = 1
	restCPU         = 0
)

// pinnedPrefix marks the pinned repeats of the core scenarios.
const pinnedPrefix = "pinned-"

// copyRelayScenarios also run the relay-copy side: the two whose proxy
// CPU per MB is compared with the relay's (a fourth side in every scenario
// would lengthen `make bench` by a third for figures nobody reads).
var copyRelayScenarios = []string{pinnedPrefix + "produce-1k", pinnedPrefix + "fetch"}

// coreScenarioIDs are the scenarios the pinned runs repeat.
var coreScenarioIDs = []string{"produce-1k", "latency-half-rate", "fetch", "produce-100b"}

// canPin says whether this machine has the two CPUs pinning uses.
func canPin() bool {
	cpus := testrig.AllCPUs()
	has := func(c int) bool {
		for _, x := range cpus {
			if x == c {
				return true
			}
		}
		return false
	}
	return has(intermediaryCPU) && has(restCPU)
}

// pin puts every process on its CPU (on) or lets every process use every
// CPU again (off). Brokers restarted later keep it: Proc.SetCPUs applies to
// later starts too.
func (c *Cluster) pin(on bool) error {
	inter, rest := []int{intermediaryCPU}, []int{restCPU}
	if !on {
		inter, rest = nil, nil
	}
	c.loadCPUs = rest
	if err := c.proxy.Proc.SetCPUs(inter); err != nil {
		return err
	}
	for _, r := range append(append([]*testrig.Proc{}, c.relays...), c.copyRelays...) {
		if err := r.SetCPUs(inter); err != nil {
			return err
		}
	}
	for _, b := range c.brokers {
		if err := b.Proc.SetCPUs(rest); err != nil {
			return err
		}
	}
	return c.etcd.SetCPUs(rest)
}

// pinnedScenarios repeats the core scenarios with the processes pinned.
func (h *Harness) pinnedScenarios(ctx context.Context) error {
	ids := make([]string, len(coreScenarioIDs))
	for i, id := range coreScenarioIDs {
		ids[i] = pinnedPrefix + id
	}
	if !h.selected(ids...) {
		return nil
	}
	if !canPin() {
		h.report.Pinning = fmt.Sprintf("not run: this machine does not have CPUs %d and %d", restCPU, intermediaryCPU)
		return nil
	}
	if err := h.cluster.pin(true); err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	h.report.Pinning = fmt.Sprintf("kproxy or the three relays alone on CPU %d; etcd, the brokers and the load generator (kbench) on CPU %d; the direct side the same with CPU %d idle. Set with sched_setaffinity on every thread (testkit/testrig SetAffinity).", intermediaryCPU, restCPU, intermediaryCPU)
	err := h.coreScenarios(ctx, pinnedPrefix)
	if uerr := h.cluster.pin(false); err == nil && uerr != nil {
		err = fmt.Errorf("unpin: %w", uerr)
	}
	return err
}

// evaluatePinned checks the pinned targets and the proxy's CPU per MB
// against the relay's.
func (r *Report) evaluatePinned() {
	add := func(name, goal, figure, st string) {
		r.Targets = append(r.Targets, Target{Name: name, Goal: goal, Figure: figure, Status: st})
	}
	for _, id := range []string{"produce-1k", "produce-100b", "fetch"} {
		name, goal := "pinned throughput "+id, "kproxy >= 0.95 x direct"
		s, ok := r.scenario(pinnedPrefix + id)
		if !ok {
			add(name, goal, "-", "not run")
			continue
		}
		d, _ := s.side(sideDirect)
		p, _ := s.side(sideProxy)
		ratio := div(p.RecordsPerSec, d.RecordsPerSec)
		add(name, goal, fmt.Sprintf("%.2f x (%.0f vs %.0f records/s; proxy used %.0f%% of its core)%s", ratio, p.RecordsPerSec, d.RecordsPerSec,
			100*p.IntermediaryCores, shortBy(ratio, 0.95, "x")), status(ratio >= 0.95 && p.Errors == 0))
	}
	name, goal := "pinned p99 at half the saturated rate", "kproxy <= direct + 1 ms"
	if s, ok := r.scenario(pinnedPrefix + "latency-half-rate"); ok {
		d, _ := s.side(sideDirect)
		p, _ := s.side(sideProxy)
		diff := float64(p.Latency.P99-d.Latency.P99) / 1000
		st := status(diff <= 1 && p.Errors == 0)
		if d.Latency.P99 > overloadedP99 {
			st = "inconclusive"
		}
		add(name, goal, fmt.Sprintf("%.2f ms vs %.2f ms (%+.2f ms)%s", ms1(p.Latency.P99), ms1(d.Latency.P99), diff, overBy(diff, 1, "ms")), st)
	} else {
		add(name, goal, "-", "not run")
	}
	for _, id := range []string{"produce-1k", "fetch"} {
		name, goal := "proxy / relay CPU per MB, "+id, "<= 1.5 x"
		s, ok := r.scenario(pinnedPrefix + id)
		which := "pinned"
		if !ok {
			s, ok = r.scenario(id)
			which = "unpinned"
		}
		if !ok {
			add(name, goal, "-", "not run")
			continue
		}
		p, _ := s.side(sideProxy)
		rl, _ := s.side(sideRelay)
		ratio := div(p.IntermediaryCPUMsPerMB, rl.IntermediaryCPUMsPerMB)
		add(name, goal, fmt.Sprintf("%.2f x (%.2f vs %.2f ms/MB, %s run)%s%s", ratio, p.IntermediaryCPUMsPerMB, rl.IntermediaryCPUMsPerMB, which,
			overBy(ratio, 1.5, "x"), copyRelayFigure(s, p)), status(ratio > 0 && ratio <= 1.5))
	}
}

// copyRelayFigure compares the proxy with the relay that copies through
// user space, when the scenario ran it: what is left above that relay is
// the proxy's own work; the rest is the kernel copying every byte out to an
// intermediary and back, which a splicing relay does not pay.
func copyRelayFigure(s ScenarioResult, p SideResult) string {
	c, ok := s.side(sideCopyRelay)
	if !ok || c.IntermediaryCPUMsPerMB == 0 {
		return ""
	}
	return fmt.Sprintf("; against a relay copying through user space %.2f x (%.2f ms/MB)",
		div(p.IntermediaryCPUMsPerMB, c.IntermediaryCPUMsPerMB), c.IntermediaryCPUMsPerMB)
}

// shortBy says how far v falls below goal, or nothing when it does not.
func shortBy(v, goal float64, unit string) string {
	if v >= goal {
		return ""
	}
	return fmt.Sprintf("; short by %.2f %s", goal-v, unit)
}

// overBy says how far v exceeds goal, or nothing when it does not.
func overBy(v, goal float64, unit string) string {
	if v <= goal {
		return ""
	}
	return fmt.Sprintf("; over by %.2f %s", v-goal, unit)
}
