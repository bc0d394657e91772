package harness

import (
	"fmt"
	"strings"
)

// markdown renders the report as docs/benchmarks.md.
func (r *Report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("Written by the benchmark harness (`bench/harness`), never by hand. Generated %s in %s on commit %s.\n\n",
		r.Generated, r.Elapsed, r.Environment.Commit)
	w("Reproduce with:\n\n```sh\n%s\n```\n\n", r.Command)
	w("`make bench` runs `go run ./bench/cmd/benchrun -docs results/benchmarks.md` and `make bench REPORTS=docs` publishes this page (without -docs it writes nothing); `go run ./bench/cmd/benchrun -h` lists the flags that scale it (duration, rounds, scenarios, connection counts).\n\n")
	// Only the load at the start says whether other work shared the
	// machine: at the end it is the run's own, and a benchmark that
	// saturates the cores always ends above their count.
	if LoadedMachine(r.Environment.LoadStart, r.Environment.Cores) {
		w("**Taken on a loaded machine** (load average %s at the start, %s at the end, on %d cores): a smoke check of the harness, not a result. Rerun on a quiet machine before quoting a figure.\n\n",
			r.Environment.LoadStart, r.Environment.LoadEnd, r.Environment.Cores)
	}
	r.setupMarkdown(w)
	if r.Pinning != "" {
		w("Pinned scenarios (titles starting \"Pinned:\"): %s The unpinned scenarios let every process use every core.\n\n", r.Pinning)
	}
	w("## Targets\n\n| target | goal | this run | status |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		w("| %s | %s | %s | **%s** |\n", t.Name, t.Goal, t.Figure, t.Status)
	}
	w("\n")
	for _, s := range r.Scenarios {
		scenarioMarkdown(w, s)
	}
	r.failoverMarkdown(w)
	if c := r.Convergence; c != nil {
		w("## Route convergence\n\n%s.\n\n", c.Method)
		w("| changes | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|\n")
		w("| %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms |\n\n", c.Samples, ms1(c.Latency.P50), ms1(c.Latency.P99), ms1(c.Latency.P999), ms1(c.Latency.Max))
	}
	if len(r.Memory) > 0 {
		w("## Memory per idle client connection\n\n")
		w("Each connection completes ApiVersions and Metadata, then stays idle; the figure is the process's RSS growth divided by the connections, read %s after the last one opened. The relay row is for comparison (one relay process; each relayed connection also opens one to its broker, and holds six descriptors, hence fewer connections).\n\n", settle)
		w("| process | connections | RSS before | RSS after | RSS per connection | Go heap+stacks per connection | command |\n|---|---|---|---|---|---|---|\n")
		for _, m := range r.Memory {
			goPer := "-"
			if m.GoBytesPerConn != 0 {
				goPer = fmt.Sprintf("%.1f KiB", m.GoBytesPerConn/1024)
			}
			w("| %s | %d | %.1f MiB | %.1f MiB | %.1f KiB | %s | `%s` |\n", m.Side, m.Conns,
				float64(m.RSSBefore)/(1<<20), float64(m.RSSAfter)/(1<<20), m.BytesPerConn/1024, goPer, m.Command)
		}
		w("\n")
	}
	if len(r.Routing) > 0 {
		w("## Go benchmarks: routing table, split and merge\n\nThe packages' own benchmarks, run by the harness: routing/ with 100,000 partitions and 1,000 brokers (lookups, one watch event applied with SetOwner, the loaded table's memory) and proxy/apis (a produce or fetch split over 3 brokers and merged, or sent whole to one; a produce naming 10,000 partitions, with ns and allocations per partition):\n\n```sh\n%s\n```\n\n", r.RoutingCommand)
		w("| package | benchmark | ns/op | other figures |\n|---|---|---|---|\n")
		for _, rb := range r.Routing {
			w("| %s | %s | %.1f | %s |\n", rb.Package, rb.Name, rb.NsPerOp, rb.Metrics)
		}
		w("\n")
	}
	for _, p := range r.Profiles {
		w("## Proxy CPU profile: %s\n\nAn extra run through kproxy (not part of the figures above), profiled for %d s with `--pprof`.", p.Run, p.Seconds)
		if p.Shares != "" {
			w(" Where its CPU goes, flat samples by kind: %s. A relay, which decodes nothing, spends nearly all its CPU on syscalls and the poller; every other kind is what the proxy adds to it.", p.Shares)
		}
		w(" `go tool pprof -top`, flat then cumulative:\n\n```\n%s\n```\n\n", p.Top)
	}
	r.missedMarkdown(w)
	if len(r.Findings) > 0 {
		w("\n## What the figures say\n\nDerived from the figures above by fixed rules in the harness:\n\n")
		for _, f := range r.Findings {
			w("- %s\n", f)
		}
	}
	return b.String()
}

// LoadedMachine says a load average's 1-minute figure exceeds the cores.
func LoadedMachine(avg string, cores int) bool {
	var one float64
	if _, err := fmt.Sscan(avg, &one); err != nil {
		return false
	}
	return cores > 0 && one > float64(cores)
}

func (r *Report) setupMarkdown(w func(string, ...any)) {
	e, s := r.Environment, r.Settings
	w("## Set-up\n\n")
	w("- Machine: %s, %d cores shared with other work (load average %s at the start, %s at the end); %s. Open-file limit %d.\n",
		e.CPU, e.Cores, e.LoadStart, e.LoadEnd, e.GoVersion, e.OpenFileLimit)
	w("- Processes: one etcd (`kproxy etcd`), three stub brokers (`kproxy broker`, lease TTL %s), kproxy (`kproxy serve`), one plain TCP relay per broker (`kbench relay`, package testkit/faultnet: splices bytes, decodes nothing) and a second one that copies through user space and the load generator (`kbench`), each its own process so CPU and memory are per process.\n", s.LeaseTTL)
	w("- Store: %s. Figures are not comparable with a broker that writes to disk or an object store.\n", e.Store)
	if e.EtcdData != "" {
		w("- etcd data: %s.\n", e.EtcdData)
	}
	w("- Sides: **direct** = clients bootstrap from the brokers and use their metadata; **kproxy** = clients bootstrap from the proxy, their only broker; **relay** = clients bootstrap from the relays and every connection to a broker goes through that broker's relay. Brokers advertise their own addresses (the proxy must reach them directly), so relay-side clients rewrite broker addresses to relay addresses in their dialer (`kbench --dial-map`), which is what advertising the relays would do. **relay-copy** (the pinned produce-1k and fetch scenarios only) = the same through relays that copy every byte through a 1 MiB buffer of their own instead of splicing (`kbench relay --user-space-copy`): the least any intermediary that reads the bytes pays, since the kernel copies each byte out to it and back. **kproxy-acl** (the acl-* scenarios only) = a second proxy with `--authorizer deny-by-default` and 1,000 ACL bindings in etcd, so that every request is checked. kproxy runs with `--produce-validation full`, the default (each produce batch framed, its header checked, its CRC-32C derived from prefix sums taken as the request frame was read, its records walked, decompressed first when compressed); **kproxy-novalidation** (the validation-produce-1k scenarios only, one per codec) = a second proxy with `--produce-validation off`. **kproxy-encrypted** (the encryption-* scenarios only) = a second proxy with `--encryption-config` (moto_server's KMS) that encrypts the scenario's topics (docs/encryption.md).\n")
	w("- Each scenario runs every side %d times (%s at least %d times, fetch and pinned-fetch at least %d, the kafscale-peer points at least %d), %s warm-up + %s measured per run, alternating sides run by run; odd rounds reverse the order and every second round rotates it, so that drift of the shared machine hits all sides alike. Throughput counts acknowledgements (or records read) inside the measured windows; latency percentiles come from merged HDR histograms (3 significant digits), not averages.\n", s.Rounds, validationID, validationMinRounds, fetchMinRounds, peerMinRounds, s.Warmup, s.Duration)
	w("- Producers use kgo with acks=all (idempotent), no compression (values are random), kgo's default 10 ms linger, and %d MiB of buffered records spread over the clients (kgo MaxBufferedRecords), so that saturated latency shows the path to the brokers rather than seconds of queueing in the client. A kgo client keeps up to 5 produce requests in flight per broker: through kproxy, which is one broker to the client, that is 5 per client instead of 15.\n", s.BufferBytes>>20)
	w("- CPU per MB: utime+stime from /proc/<pid>/stat of the proxy (or the three relays), the brokers and the load generator (client CPU) across the measured windows, divided by the MB (10^6 bytes) of record values moved in them; for fetch runs across the whole run and everything read. Cores busy: the CPU time of all of them over the measured time (this machine has %d).\n\n", e.Cores)
}

func scenarioMarkdown(w func(string, ...any), s ScenarioResult) {
	w("## %s\n\n%s.\n\n", s.Title, capitalize(s.What))
	w("| side | records/s | MB/s | p50 | p99 | p99.9 | max | errors | proxy or relay CPU | broker CPU | client CPU | cores busy | runs (records/s) |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Sides {
		inter := "-"
		if r.Side != sideDirect {
			inter = fmt.Sprintf("%.2f ms/MB (%.0f%% of a core)", r.IntermediaryCPUMsPerMB, 100*r.IntermediaryCores)
		}
		runs := make([]string, len(r.RunRecordsPerSec))
		for i, v := range r.RunRecordsPerSec {
			runs[i] = fmt.Sprintf("%.0f", v)
		}
		w("| %s | %.0f | %.2f | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d | %s | %.2f ms/MB | %.2f ms/MB | %.2f | %s |\n",
			r.Side, r.RecordsPerSec, r.MBPerSec, ms1(r.Latency.P50), ms1(r.Latency.P99), ms1(r.Latency.P999),
			ms1(r.Latency.Max), r.Errors, inter, r.BrokerCPUMsPerMB, r.ClientCPUMsPerMB, r.Cores, strings.Join(runs, ", "))
	}
	w("\n")
	var ratios []string
	for _, q := range s.Ratios {
		if q.Unit == "x" {
			ratios = append(ratios, fmt.Sprintf("%s **%.2f x**", q.Name, q.Value))
		} else {
			ratios = append(ratios, fmt.Sprintf("%s **%+.2f ms**", q.Name, q.Value))
		}
	}
	w("Ratios: %s.\n\n", strings.Join(ratios, "; "))
	for _, r := range s.Sides {
		if r.FirstError != "" {
			w("First error on %s: `%s`\n\n", r.Side, r.FirstError)
		}
	}
	for _, n := range s.Notes {
		w("%s\n\n", n)
	}
	w("<details><summary>kbench commands (first round; binaries built by the harness, addresses from that run)</summary>\n\n```sh\n")
	for _, r := range s.Sides {
		w("%s\n", r.Command)
	}
	w("```\n\n</details>\n\n")
}

func (r *Report) failoverMarkdown(w func(string, ...any)) {
	if len(r.Failover) == 0 {
		return
	}
	w("## Failover through kproxy\n\n")
	w("An application (kgo, default settings, manual partitioner) produces %d records/s to one partition through kproxy; the harness kills the partition's owner with SIGKILL. Failover is the time from the kill to the first acknowledgement of a record sent after the kill (only the successor can have written it). The owner key's deletion (lease expiry, seen by an etcd watch) and re-creation by the successor are shown for the breakdown.\n\n", failoverRate)
	w("| partition | old owner | new owner | owner key gone | new owner key | first ack | acked | application errors |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range r.Failover {
		w("| %d | %d | %d | %.2f s | %.2f s | **%.2f s** | %d | %d |\n", f.Partition, f.OldOwner, f.NewOwner,
			f.OwnerGoneSeconds, f.NewOwnerSeconds, f.FailoverSeconds, f.Acked, f.Errors)
		if f.FirstError != "" {
			w("\nFirst application error: `%s`\n", f.FirstError)
		}
	}
	w("\n")
}

func (r *Report) missedMarkdown(w func(string, ...any)) {
	var missed []Target
	for _, t := range r.Targets {
		if t.Status == "missed" {
			missed = append(missed, t)
		}
	}
	w("## Missed targets\n\n")
	if len(missed) == 0 {
		w("None in this run.\n")
	}
	for _, t := range missed {
		w("- %s: goal %s, measured %s.\n", t.Name, t.Goal, t.Figure)
	}
	for _, t := range r.Targets {
		if t.Status == "inconclusive" {
			w("- %s is inconclusive in this run (%s): see below.\n", t.Name, t.Figure)
		}
	}
	if len(r.Profiles) > 0 {
		w("\nSee the proxy CPU profiles above for where the proxy spends its time.\n")
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
