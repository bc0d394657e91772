package scale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReportTargetsAndMarkdown(t *testing.T) {
	rep := &Report{Command: "make scale", Generated: "2026-12-01T09:00:00Z", Elapsed: "1m", Machine: "test",
		LoadStart: "9.0 9.0 9.0", LoadEnd: "0.1 0.1 0.1", LeaseTTL: "10s",
		Sizes: []SizeResult{
			{Partitions: 10_000, ColdStart: 3 * time.Second, SessionLosses: 0, Takeover: 12 * time.Second, TakeoverParts: 3333,
				ProxyFigures: ProxyFigures{ProxyRSS: []int64{64 << 20, 65 << 20}, ConvergeP99: 5 * time.Millisecond, ConvergeN: 50}},
			{Partitions: 30_000, ColdStart: time.Minute, Failed: 7, SessionLosses: 2, Takeover: 40 * time.Second,
				ProxyFigures: ProxyFigures{ConvergeP99: 80 * time.Millisecond, ConvergeN: 50}},
			{Partitions: 2_000, SessionLosses: -1, OwnershipLosses: 3, Takeover: time.Second, ProxyFigures: ProxyFigures{ConvergeN: 1}},
		},
		Sim: &SimResult{Brokers: 1000, Partitions: 100_000, Topics: 1000,
			ProxyFigures: ProxyFigures{ConvergeP99: 10 * time.Millisecond, ConvergeN: 50}},
	}
	rep.evaluate(10 * time.Second)
	want := map[string]string{
		"10000 partitions: cold start":                               "met",
		"10000 partitions: session losses":                           "met",
		"10000 partitions: takeover of a killed broker's partitions": "met",
		"10000 partitions: route convergence p99 (both proxies)":     "met",
		"30000 partitions: cold start":                               "missed",
		"30000 partitions: session losses":                           "missed",
		"30000 partitions: takeover of a killed broker's partitions": "missed",
		"30000 partitions: route convergence p99 (both proxies)":     "missed",
		"2000 partitions: session losses":                            "inconclusive",
		"1000 simulated brokers: route convergence p99":              "met",
	}
	got := map[string]string{}
	for _, tg := range rep.Targets {
		got[tg.Name] = tg.Status
	}
	for name, st := range want {
		if got[name] != st {
			t.Errorf("target %q: status %q, want %q", name, got[name], st)
		}
	}
	path := filepath.Join(t.TempDir(), "docs", "scale.md")
	if err := rep.WriteMarkdown(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, s := range []string{"`make scale`", "**This is a smoke run, not a result**", "| 10000 | 3s |", "3333", "64 + 65 MiB",
		"## 1000 simulated brokers", "Partition counts run: 10000, 30000, 2000; `make scale` runs 10000, 30000, 100000.", "| 30000 partitions: session losses | 0 | 2 (ownerships lost without release: 0) | missed |", "not exported"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	quiet := *rep
	// The load at the end is the run's own (it keeps both cores busy):
	// only the load at the start shows other work.
	quiet.LoadStart, quiet.LoadEnd = "0.2 1.8 3.1", "3.7 2.8 3.3"
	if md := quiet.Markdown(); strings.Contains(md, "smoke run") {
		t.Errorf("a full run started on a quiet machine is labelled a smoke run:\n%s", md)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 3}, {0.99, 5}, {1, 5}, {0, 1}} {
		if got := percentile(ds, c.q); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}
