package harness

import (
	"strings"
	"testing"

	"github.com/kproxy/kproxy/bench/load"
)

func pinnedScenario(id string, direct, proxy, relay float64, proxyMs, relayMs float64) ScenarioResult {
	return ScenarioResult{ID: id, Sides: []SideResult{
		{Side: sideDirect, RecordsPerSec: direct},
		{Side: sideProxy, RecordsPerSec: proxy, IntermediaryCPUMsPerMB: proxyMs},
		{Side: sideRelay, RecordsPerSec: relay, IntermediaryCPUMsPerMB: relayMs},
	}}
}

func TestEvaluatePinned(t *testing.T) {
	half := pinnedScenario("pinned-latency-half-rate", 1, 1, 1, 0, 0)
	half.Sides[0].Latency = load.Latency{P99: 3000}
	half.Sides[1].Latency = load.Latency{P99: 5500}
	produce := pinnedScenario("pinned-produce-1k", 100, 97, 99, 3, 2) // 0.97 x; CPU 1.5 x
	produce.Sides = append(produce.Sides, SideResult{Side: sideCopyRelay, RecordsPerSec: 99, IntermediaryCPUMsPerMB: 2.4})
	r := &Report{Scenarios: []ScenarioResult{
		produce,
		pinnedScenario("pinned-produce-100b", 100, 80, 99, 3, 1), // 0.80 x
		pinnedScenario("fetch", 100, 50, 99, 4, 2),               // only unpinned: CPU 2 x
		half,
	}}
	r.evaluatePinned()
	want := map[string]string{
		"pinned throughput produce-1k":          "met",
		"pinned throughput produce-100b":        "missed",
		"pinned throughput fetch":               "not run",
		"pinned p99 at half the saturated rate": "missed",
		"proxy / relay CPU per MB, produce-1k":  "met",
		"proxy / relay CPU per MB, fetch":       "missed",
	}
	for _, tg := range r.Targets {
		if want[tg.Name] != tg.Status {
			t.Errorf("%s: %s (%s), want %s", tg.Name, tg.Status, tg.Figure, want[tg.Name])
		}
		switch tg.Name {
		case "pinned throughput produce-100b":
			if !strings.Contains(tg.Figure, "short by 0.15 x") {
				t.Errorf("%s: figure %q does not say by how much", tg.Name, tg.Figure)
			}
		case "pinned p99 at half the saturated rate":
			if !strings.Contains(tg.Figure, "over by 1.50 ms") {
				t.Errorf("%s: figure %q does not say by how much", tg.Name, tg.Figure)
			}
		case "proxy / relay CPU per MB, fetch":
			if !strings.Contains(tg.Figure, "unpinned run") || !strings.Contains(tg.Figure, "over by 0.50 x") ||
				strings.Contains(tg.Figure, "user space") {
				t.Errorf("%s: figure %q", tg.Name, tg.Figure)
			}
		case "proxy / relay CPU per MB, produce-1k":
			if !strings.Contains(tg.Figure, "against a relay copying through user space 1.25 x (2.40 ms/MB)") {
				t.Errorf("%s: figure %q lacks the copying relay", tg.Name, tg.Figure)
			}
		}
	}
	if len(r.Targets) != len(want) {
		t.Errorf("%d targets, want %d", len(r.Targets), len(want))
	}
}

func TestSharesOf(t *testing.T) {
	top := `File: kproxy
Showing nodes accounting for 9s, 90% of 10s total
      flat  flat%   sum%        cum   cum%
     4.00s 40.00% 40.00%      4.00s 40.00%  internal/runtime/syscall.Syscall6
     2.00s 20.00% 60.00%      2.00s 20.00%  runtime.scanobject
     1.50s 15.00% 75.00%      1.50s 15.00%  github.com/twmb/franz-go/pkg/kmsg.(*ProduceRequest).ReadFrom
     1.00s 10.00% 85.00%      3.00s 30.00%  github.com/kproxy/kproxy/proxy/apis.(*Dispatcher).Begin
     0.50s  5.00% 90.00%      0.50s  5.00%  runtime.mallocgc
`
	got := sharesOf(top)
	want := "syscalls and the network poller (a relay pays these too) 40%; garbage collection and allocation 25%; Kafka protocol decode and encode (franz-go) 15%; proxy code (kproxy packages) 10%"
	if got != want {
		t.Errorf("sharesOf:\n got %s\nwant %s", got, want)
	}
}
