package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench/harness"
)

// Report is one run's figures and each target's status.
type Report struct {
	Generated string           `json:"generated"`
	Elapsed   string           `json:"elapsed"`
	Command   string           `json:"command"`
	Quick     bool             `json:"quick"`
	Machine   string           `json:"machine"`
	LoadStart string           `json:"load_start"`
	LoadEnd   string           `json:"load_end"`
	LeaseTTL  string           `json:"lease_ttl"`
	Sizes     []SizeResult     `json:"sizes"`
	Sim       *SimResult       `json:"simulation,omitempty"`
	Targets   []harness.Target `json:"targets"`
}

func newReport(cfg Config) *Report {
	return &Report{
		Generated: time.Now().UTC().Format(time.RFC3339), Command: cfg.Command, Quick: cfg.Quick,
		Machine:   fmt.Sprintf("%s, %d cores, %s", harness.CPUModel(), runtime.NumCPU(), runtime.Version()),
		LoadStart: harness.LoadAverage(), LeaseTTL: cfg.LeaseTTL.String(),
	}
}

// convergenceGoal is the bench's route convergence target.
const convergenceGoal = 50 * time.Millisecond

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// evaluate sets every target's status from the figures.
func (r *Report) evaluate(ttl time.Duration) {
	r.Targets = nil
	add := func(name, goal, figure string, ok bool) {
		r.Targets = append(r.Targets, harness.Target{Name: name, Goal: goal, Figure: figure, Status: status(ok)})
	}
	takeoverGoal := ttl + 10*time.Second
	for _, s := range r.Sizes {
		p := fmt.Sprintf("%d partitions: ", s.Partitions)
		add(p+"cold start", "every partition acknowledged, no client hang",
			fmt.Sprintf("%s, %d failed, %d unanswered", s.ColdStart.Round(time.Millisecond), s.Failed, s.Unanswered), s.Failed == 0 && s.Unanswered == 0)
		if s.SessionLosses < 0 {
			r.Targets = append(r.Targets, harness.Target{Name: p + "session losses", Goal: "0",
				Figure: fmt.Sprintf("not exported by this build (%s absent); ownerships lost without release: %.0f", SessionLossSeries, s.OwnershipLosses),
				Status: "inconclusive"})
		} else {
			add(p+"session losses", "0", fmt.Sprintf("%.0f (ownerships lost without release: %.0f)", s.SessionLosses, s.OwnershipLosses), s.SessionLosses == 0)
		}
		fig := fmt.Sprintf("%s for %d partitions, %d records failed", s.Takeover.Round(time.Millisecond), s.TakeoverParts, s.TakeoverFailed)
		if s.TakeoverErr != "" {
			fig = fmt.Sprintf("incomplete after %s: %s", s.Takeover.Round(time.Millisecond), s.TakeoverErr)
		}
		add(p+"takeover of a killed broker's partitions", "<= lease TTL + 10 s = "+takeoverGoal.String(), fig,
			s.TakeoverErr == "" && s.Takeover > 0 && s.Takeover <= takeoverGoal && s.TakeoverFailed == 0)
		add(p+"route convergence p99 (both proxies)", "<= "+convergenceGoal.String(),
			fmt.Sprintf("%.2f ms (p50 %.2f ms, %d moves)", msOf(s.ConvergeP99), msOf(s.ConvergeP50), s.ConvergeN),
			s.ConvergeN > 0 && s.ConvergeP99 <= convergenceGoal)
	}
	if s := r.Sim; s != nil {
		add(fmt.Sprintf("%d simulated brokers: route convergence p99", s.Brokers), "<= "+convergenceGoal.String(),
			fmt.Sprintf("%.2f ms (p50 %.2f ms, %d moves)", msOf(s.ConvergeP99), msOf(s.ConvergeP50), s.ConvergeN),
			s.ConvergeN > 0 && s.ConvergeP99 <= convergenceGoal)
	}
}

// WriteMarkdown renders the report to path.
func (r *Report) WriteMarkdown(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("report folder: %w", err)
	}
	if err := os.WriteFile(path, []byte(r.Markdown()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Markdown is the report as docs/scale.md.
func (r *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Scale: kproxy at 10k to 100k partitions")
	w("")
	w("Written by `%s` on %s (took %s). Machine: %s; load average %s at the start, %s at the end.", r.Command, r.Generated, r.Elapsed, r.Machine, r.LoadStart, r.LoadEnd)
	w("")
	if why := smokeWhy(r); why != "" {
		w("**This is a smoke run, not a result**: %s. Its figures show the harness works and roughly where the costs are; rerun `make scale` on a quiet machine for figures to quote.", why)
		w("")
	}
	if !r.fullSizes() {
		w("Partition counts run: %s; `make scale` runs %s.", r.sizeList(r.runSizes()), r.sizeList(DefaultSizes))
		w("")
	}
	w("Set-up: `kproxy etcd` (data on tmpfs), 3 `kproxy broker` (memory store, lease TTL %s) and 2 `kproxy serve`, each its own process, started fresh for every partition count. The topic is written straight to etcd; a kgo producer (in the harness process, seeded with both proxies, manual partitioner) then sends one record to every partition at once.", r.LeaseTTL)
	w("")
	w("## Targets")
	w("")
	w("| target | goal | figure | status |")
	w("|---|---|---|---|")
	for _, t := range r.Targets {
		w("| %s | %s | %s | %s |", t.Name, t.Goal, t.Figure, t.Status)
	}
	w("")
	if len(r.Sizes) > 0 {
		w("## Figures per partition count")
		w("")
		w("| partitions | cold start | etcd txn/s | etcd proposals/s | etcd DB | session losses | takeover (partitions) | proxy RSS | Metadata all topics p50 / max | convergence p50 / p99 |")
		w("|---|---|---|---|---|---|---|---|---|---|")
		for _, s := range r.Sizes {
			w("| %d | %s | %.0f | %.0f | %.1f MiB | %s | %s (%d) | %s | %.1f / %.1f ms | %.2f / %.2f ms |",
				s.Partitions, s.ColdStart.Round(time.Millisecond), s.EtcdTxnPerSec, s.EtcdProposalPerSec, s.EtcdDBBytes/(1<<20),
				losses(s.SessionLosses), s.Takeover.Round(time.Millisecond), s.TakeoverParts, mib(s.ProxyRSS),
				msOf(s.MetadataP50), msOf(s.MetadataMax), msOf(s.ConvergeP50), msOf(s.ConvergeP99))
		}
		w("")
		w("etcd rates are over the cold start (etcd_mvcc_txn_total and etcd_server_proposals_committed_total from etcd's /metrics); the DB size is etcd_mvcc_db_total_size_in_bytes after it. Takeover runs from `kill -9` of the broker owning the most partitions (about a third) until etcd lists a survivor as owner of every one, with a producer sending one record to each of them meanwhile (brokers acquire on demand). Convergence moves an owner key in etcd and waits until both proxies' /readyz revision reaches the put's revision.")
		w("")
	}
	if s := r.Sim; s != nil {
		w("## %d simulated brokers", s.Brokers)
		w("")
		w("Lease sessions (one lease per broker), broker keys with addresses nobody listens on, %d topics of %d partitions and an owner key per partition under its broker's lease, all written straight to etcd in %s; no broker process. Two proxies then started and synced in %s.", s.Topics, simTopicPartitions, s.Load.Round(time.Millisecond), s.Sync.Round(time.Millisecond))
		w("")
		w("| partitions | proxy RSS | Metadata all topics p50 / max (partitions listed) | convergence p50 / p99 |")
		w("|---|---|---|---|")
		w("| %d | %s | %.1f / %.1f ms (%d) | %.2f / %.2f ms |", s.Partitions, mib(s.ProxyRSS), msOf(s.MetadataP50), msOf(s.MetadataMax), s.MetadataParts, msOf(s.ConvergeP50), msOf(s.ConvergeP99))
		w("")
	}
	return b.String()
}

func (r *Report) runSizes() []int {
	out := make([]int, len(r.Sizes))
	for i, s := range r.Sizes {
		out[i] = s.Partitions
	}
	return out
}

func (r *Report) fullSizes() bool { return slices.Equal(r.runSizes(), DefaultSizes) }

func (r *Report) sizeList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprintf("%d", n)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// loaded says a load average's first figure exceeds the cores.
func loaded(avg string) bool { return harness.LoadedMachine(avg, runtime.NumCPU()) }

// smokeWhy says why the run is a smoke run, or "" when it is a result.
func smokeWhy(r *Report) string {
	var why []string
	if r.Quick {
		why = append(why, "quick mode (small partition counts)")
	}
	// The load at the end is the run's own; only the start shows other work.
	if loaded(r.LoadStart) {
		why = append(why, fmt.Sprintf("the machine was loaded (load average %s to %s on %d cores, shared with other work)", r.LoadStart, r.LoadEnd, runtime.NumCPU()))
	}
	return strings.Join(why, "; ")
}

func losses(v float64) string {
	if v < 0 {
		return "not exported"
	}
	return fmt.Sprintf("%.0f", v)
}

func mib(rss []int64) string {
	var parts []string
	for _, v := range rss {
		parts = append(parts, fmt.Sprintf("%.0f", float64(v)/(1<<20)))
	}
	return strings.Join(parts, " + ") + " MiB"
}
