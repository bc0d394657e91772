package harness

import (
	"strings"
	"testing"

	"github.com/kproxy/kproxy/bench/load"
)

func peerScenario(id string, k, p SideResult) ScenarioResult {
	k.Side, p.Side = sideKproxyKS, sideKafScaleProxy
	return ScenarioResult{ID: id, Sides: []SideResult{k, p}}
}

// TestEvaluateKafScalePeer: each kafscale-peer target follows from the
// point's two sides, errors fail it, and a point not run says so.
func TestEvaluateKafScalePeer(t *testing.T) {
	side := func(mbs float64, p99 int64, cpu float64, errs int64) SideResult {
		return SideResult{MBPerSec: mbs, Latency: load.Latency{P99: p99}, IntermediaryCPUMsPerMB: cpu, Errors: errs}
	}
	r := &Report{Scenarios: []ScenarioResult{
		peerScenario("kafscale-peer-4x1k", side(30, 900, 6, 0), side(25, 1000, 10, 0)),   // all met
		peerScenario("kafscale-peer-16x1k", side(24, 1100, 8, 0), side(25, 1000, 10, 0)), // all missed
		peerScenario("kafscale-peer-64x1k", side(30, 900, 6, 3), side(25, 1000, 10, 0)),  // errors
		// kafscale-peer-4x16k not run
	}}
	r.evaluateKafScalePeer()
	want := map[string]string{
		"kafscale-peer throughput, kafscale-peer-4x1k":        "met",
		"kafscale-peer p99, kafscale-peer-4x1k":               "met",
		"kafscale-peer proxy CPU per MB, kafscale-peer-4x1k":  "met",
		"kafscale-peer throughput, kafscale-peer-16x1k":       "missed",
		"kafscale-peer p99, kafscale-peer-16x1k":              "missed",
		"kafscale-peer proxy CPU per MB, kafscale-peer-16x1k": "missed",
		"kafscale-peer throughput, kafscale-peer-64x1k":       "missed",
		"kafscale-peer p99, kafscale-peer-64x1k":              "missed",
		"kafscale-peer proxy CPU per MB, kafscale-peer-64x1k": "missed",
		"kafscale-peer throughput, kafscale-peer-4x16k":       "not run",
		"kafscale-peer p99, kafscale-peer-4x16k":              "not run",
	}
	if len(r.Targets) != len(want) {
		t.Errorf("%d targets, want %d (no CPU target at 16 KiB)", len(r.Targets), len(want))
	}
	for _, tg := range r.Targets {
		if w, ok := want[tg.Name]; !ok || w != tg.Status {
			t.Errorf("%s: %s (%s), want %q", tg.Name, tg.Status, tg.Figure, w)
		}
	}
	for _, tg := range r.Targets {
		if tg.Name == "kafscale-peer proxy CPU per MB, kafscale-peer-16x1k" && !strings.Contains(tg.Figure, "0.80 x") {
			t.Errorf("%s: figure %q lacks the ratio", tg.Name, tg.Figure)
		}
	}
}
