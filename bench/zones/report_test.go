package zones

import (
	"strings"
	"testing"
	"time"
)

// TestTargets: the report's verdicts follow the figures: cross-zone share
// of consumed bytes against 5%, zone p99 end-to-end against owner + 10%.
func TestTargets(t *testing.T) {
	mode := func(name string, fetch [3]float64, e2eMillis ...int64) *ModeResult {
		m := newModeResult(name)
		m.Bytes.proxyFetch = fetch
		for _, ms := range e2eMillis {
			if err := m.E2E.RecordValue(ms * 1000); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	cases := []struct {
		name       string
		zoneFetch  [3]float64
		zoneMillis int64
		want       [2]string
	}{
		{"both met", [3]float64{99, 1, 0}, 105, [2]string{"met", "met"}},
		{"cross-zone above 5%", [3]float64{90, 10, 0}, 100, [2]string{"MISSED", "met"}},
		{"latency above owner + 10%", [3]float64{100, 0, 0}, 120, [2]string{"met", "MISSED"}},
		{"nothing fetched", [3]float64{}, 100, [2]string{"MISSED", "met"}},
	}
	for _, c := range cases {
		r := &Report{Config: Config{}.withDefaults(), Modes: map[string]*ModeResult{
			"owner": mode("owner", [3]float64{33, 67, 0}, 100),
			"zone":  mode("zone", c.zoneFetch, c.zoneMillis),
		}}
		r.finish(time.Minute)
		if len(r.Targets) != 2 || r.Targets[0].Status != c.want[0] || r.Targets[1].Status != c.want[1] {
			t.Errorf("%s: targets %+v, want statuses %v", c.name, r.Targets, c.want)
		}
		if md := r.Markdown(); !strings.Contains(md, "| cross-zone bytes per MB consumed (proxy count) | 0.670 MB |") {
			t.Errorf("%s: the markdown lacks the owner's consumed cross-zone share:\n%s", c.name, md)
		}
	}
}
