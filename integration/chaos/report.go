package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/checker"
	"github.com/kproxy/kproxy/integration/chaos/history"
)

// Report is what a run found; report.json holds it.
type Report struct {
	Name           string    `json:"name"`
	Dir            string    `json:"dir"`
	Seed           uint64    `json:"seed"`
	Started        time.Time `json:"started"`
	Elapsed        string    `json:"elapsed"`
	FaultDuration  string    `json:"fault_duration"`
	LeaseTTL       string    `json:"lease_ttl"`
	DisableFencing bool      `json:"disable_fencing"`
	Producers      int       `json:"producers"`
	Partitions     int32     `json:"partitions"`
	Mode           string    `json:"mode"`
	// Zones is the zone mode's zones (none: every read goes to the owner's
	// route; see Options.Zones).
	Zones []string `json:"zones,omitempty"`

	Valid     bool                 `json:"valid"`
	Faults    map[string]int       `json:"faults_by_kind"`
	Anomalies map[checker.Kind]int `json:"anomalies_by_kind"`
	// NotLeader counts sends whose error was NOT_LEADER_OR_FOLLOWER.
	NotLeader int `json:"not_leader_errors"`
	// SendErrors counts send errors by message (the most frequent ones).
	SendErrors map[string]int `json:"send_errors"`
	// AckedAfterHeal counts sends acknowledged after the final heal: the
	// cluster recovered.
	AckedAfterHeal int `json:"acked_after_heal"`
	// FencedCommits sums the brokers' fencing counters (metrics scraped
	// every second; counts made just before a kill -9 are missed).
	FencedCommits float64            `json:"fenced_commits"`
	Counters      map[string]float64 `json:"counters"`
	ScrapeErrors  int                `json:"scrape_errors"`
	Check         checker.Result     `json:"check"`
}

func (rep *Report) fill(res checker.Result, ops []history.Op, healed time.Duration) {
	rep.Check = res
	rep.Valid = res.Valid
	rep.Faults = res.Faults
	rep.Anomalies = res.Counts
	rep.SendErrors = map[string]int{}
	errs := map[string]int{}
	for _, op := range ops {
		if op.F != history.Send || op.Type == history.Invoke {
			continue
		}
		if op.Type == history.OK && time.Duration(op.Time) > healed {
			rep.AckedAfterHeal++
		}
		if op.Error == "" {
			continue
		}
		if strings.Contains(op.Error, "NOT_LEADER") {
			rep.NotLeader++
		}
		errs[shorten(op.Error)]++
	}
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range errs {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || (all[i].v == all[j].v && all[i].k < all[j].k) })
	for i, e := range all {
		if i == 10 {
			break
		}
		rep.SendErrors[e.k] = e.v
	}
}

// MutationDetected reports whether the run found what a missing fence
// causes: lost writes or inconsistent offsets.
func (rep *Report) MutationDetected() bool {
	return rep.Anomalies[checker.InconsistentOffsets] > 0 || rep.Anomalies[checker.LostWrite] > 0
}

// Counter sums the accumulated series of one metric, named "broker:<name>"
// or "proxy:<name>", over its labels.
func (rep *Report) Counter(name string) float64 {
	var sum float64
	for series, v := range rep.Counters {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v
		}
	}
	return sum
}

func shorten(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// Summary is the short human summary: operations, faults by kind, anomalies
// by kind, and the verdict.
func (rep *Report) Summary() string {
	var b strings.Builder
	fencing := "on"
	if rep.DisableFencing {
		fencing = "DISABLED (mutation)"
	}
	s := rep.Check.Stats
	fmt.Fprintf(&b, "kchaos %s: seed %d, fencing %s, lease TTL %s, faults for %s, elapsed %s\n",
		rep.Name, rep.Seed, fencing, rep.LeaseTTL, rep.FaultDuration, rep.Elapsed)
	fmt.Fprintf(&b, "operations: %d sends (%d ok, %d fail, %d info; %d idempotent), %d polls (%d records), %d final reads (%d records)\n",
		s.Sends, s.SendsOK, s.SendsFail, s.SendsInfo, s.SendsIdempotent, s.Polls, s.PolledRecords, s.FinalReads, s.FinalRecords)
	fmt.Fprintf(&b, "faults: %s\n", countsLine(rep.Faults))
	fmt.Fprintf(&b, "fault evidence: %.0f fenced commits (broker metrics), %d NOT_LEADER_OR_FOLLOWER send errors, %.0f proxy retries; %d sends acknowledged after the final heal\n",
		rep.FencedCommits, rep.NotLeader, rep.Counter("proxy:kproxy_retries_total"), rep.AckedAfterHeal)
	an := map[string]int{}
	for k, v := range rep.Anomalies {
		an[string(k)] = v
	}
	fmt.Fprintf(&b, "anomalies: %s\n", countsLine(an))
	for i, a := range rep.Check.Anomalies {
		if i == 5 {
			fmt.Fprintf(&b, "  ... (all in report.json)\n")
			break
		}
		fmt.Fprintf(&b, "  %s: %s (ops %v)\n", a.Kind, a.Detail, a.Ops)
	}
	verdict := "VALID: no anomaly"
	if !rep.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "verdict: %s\nfolder: %s\n", verdict, rep.Dir)
	return b.String()
}

func countsLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
