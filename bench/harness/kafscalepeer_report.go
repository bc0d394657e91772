package harness

import (
	"fmt"
	"sort"
	"strings"
)

// kafscalepeer_report.go turns kafscale-peer's runs into a scenario table:
// each figure the median of the rounds.

func peerResult(id string, pt peerPoint, sides []string, runs map[string][]peerRun) ScenarioResult {
	res := ScenarioResult{
		ID: id,
		Title: fmt.Sprintf("KafScale peer: %d producers, %d KiB records, kproxy vs KafScale's proxy on two real KafScale brokers",
			pt.producers, pt.recordSize>>10),
		What: "franz-go producers (kbench, acks=all, linger 0) through kproxy (`serve --etcd-layout kafscale`) and through KafScale's own proxy, " +
			"each in front of two KafScale brokers (built from KAFSCALE_SRC; moto_server as S3; embedded etcd), every run on a fresh cluster of its own " +
			"(so that neither proxy works on the partition placement or S3 objects the other left), sides alternating; " +
			"each figure is the median of the rounds, and proxy CPU is each proxy process's own user+system time",
	}
	for _, s := range sides {
		res.Sides = append(res.Sides, peerSide(s, runs[s]))
	}
	k, p := res.Sides[0], res.Sides[1]
	res.Ratios = []Ratio{
		{"kproxy / KafScale proxy throughput", div(k.MBPerSec, p.MBPerSec), "x"},
		{"kproxy / KafScale proxy p99", div(float64(k.Latency.P99), float64(p.Latency.P99)), "x"},
		{"kproxy / KafScale proxy CPU per MB", div(k.IntermediaryCPUMsPerMB, p.IntermediaryCPUMsPerMB), "x"},
	}
	for _, s := range sides {
		res.Notes = append(res.Notes, fmt.Sprintf("Upstream connections per broker, %s (mid-window, median of rounds): %s.", s, medianConns(runs[s])))
	}
	res.Notes = append(res.Notes, "Only the proxies' CPU is measured here: the broker, client and cores-busy columns are not (0).")
	return res
}

// peerSide is one side's medians over its runs.
func peerSide(name string, runs []peerRun) SideResult {
	r := SideResult{Side: name, Runs: len(runs)}
	var mbs, rps, p50, p99, p999, mx, cpu, cores []float64
	for i, run := range runs {
		if i == 0 {
			r.Command = run.commands
		}
		x := run.res
		r.Records += x.Records
		r.Bytes += x.Bytes
		r.Seconds += x.Seconds
		r.Errors += x.Errors
		if r.FirstError == "" {
			r.FirstError = x.FirstError
		}
		r.RunRecordsPerSec = append(r.RunRecordsPerSec, round1(x.RecordsPerSec))
		rps = append(rps, x.RecordsPerSec)
		mbs = append(mbs, x.MBPerSec)
		p50, p99 = append(p50, float64(x.Latency.P50)), append(p99, float64(x.Latency.P99))
		p999, mx = append(p999, float64(x.Latency.P999)), append(mx, float64(x.Latency.Max))
		if mb := float64(x.Bytes) / 1e6; mb > 0 {
			cpu = append(cpu, ms(run.cpu)/mb)
		}
		if x.Seconds > 0 {
			cores = append(cores, run.cpu.Seconds()/x.Seconds)
		}
	}
	r.RecordsPerSec, r.MBPerSec = median(rps), median(mbs)
	r.Latency.P50, r.Latency.P99 = int64(median(p50)), int64(median(p99))
	r.Latency.P999, r.Latency.Max = int64(median(p999)), int64(median(mx))
	r.IntermediaryCPUMsPerMB, r.IntermediaryCores = median(cpu), median(cores)
	return r
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// medianConns is each broker's median connection count, "a, b".
func medianConns(runs []peerRun) string {
	if len(runs) == 0 || len(runs[0].conns) == 0 {
		return "-"
	}
	out := make([]string, len(runs[0].conns))
	for b := range out {
		var v []float64
		for _, r := range runs {
			if b < len(r.conns) {
				v = append(v, float64(r.conns[b]))
			}
		}
		out[b] = fmt.Sprintf("broker %d: %.0f", b, median(v))
	}
	return strings.Join(out, ", ")
}

// The kafscale-peer goals (issue 27): kproxy validates, meters and
// authorizes more than KafScale's proxy, and must still cost less.
const (
	peerThroughputGoal = 1.0 // kproxy / KafScale proxy, at least
	peerP99Goal        = 1.0 // at most
	peerCPUGoal        = 0.7 // at most, 1 KiB points
)

// evaluateKafScalePeer checks every kafscale-peer point's ratios of
// kproxy to KafScale's proxy against the goals.
func (r *Report) evaluateKafScalePeer() {
	for _, pt := range peerPoints {
		id := pt.id()
		tp := Target{Name: "kafscale-peer throughput, " + id, Goal: fmt.Sprintf(">= %.1f x KafScale's proxy", peerThroughputGoal), Figure: "-", Status: "not run"}
		lat := Target{Name: "kafscale-peer p99, " + id, Goal: fmt.Sprintf("<= %.1f x KafScale's proxy", peerP99Goal), Figure: "-", Status: "not run"}
		cpu := Target{Name: "kafscale-peer proxy CPU per MB, " + id, Goal: fmt.Sprintf("<= %.1f x KafScale's proxy", peerCPUGoal), Figure: "-", Status: "not run"}
		if s, ok := r.scenario(id); ok {
			k, _ := s.side(sideKproxyKS)
			p, _ := s.side(sideKafScaleProxy)
			clean := k.Errors == 0 && p.Errors == 0
			ratio := div(k.MBPerSec, p.MBPerSec)
			tp.Figure = fmt.Sprintf("%.2f x (%.1f vs %.1f MB/s; runs %v vs %v records/s)", ratio, k.MBPerSec, p.MBPerSec, k.RunRecordsPerSec, p.RunRecordsPerSec)
			tp.Status = status(clean && ratio >= peerThroughputGoal)
			ratio = div(float64(k.Latency.P99), float64(p.Latency.P99))
			lat.Figure = fmt.Sprintf("%.2f x (%.0f vs %.0f ms)%s", ratio, ms1(k.Latency.P99), ms1(p.Latency.P99), overBy(ratio, peerP99Goal, "x"))
			lat.Status = status(clean && ratio > 0 && ratio <= peerP99Goal)
			ratio = div(k.IntermediaryCPUMsPerMB, p.IntermediaryCPUMsPerMB)
			cpu.Figure = fmt.Sprintf("%.2f x (%.2f vs %.2f ms/MB)%s", ratio, k.IntermediaryCPUMsPerMB, p.IntermediaryCPUMsPerMB, overBy(ratio, peerCPUGoal, "x"))
			cpu.Status = status(clean && ratio > 0 && ratio <= peerCPUGoal)
		}
		r.Targets = append(r.Targets, tp, lat)
		if pt.recordSize == 1024 {
			r.Targets = append(r.Targets, cpu)
		}
	}
}
