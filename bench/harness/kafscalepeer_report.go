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
			"in front of the same two KafScale brokers (built from KAFSCALE_SRC; moto_server as S3; embedded etcd), sides alternating; " +
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
