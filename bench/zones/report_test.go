package zones

import (
	"strings"
	"testing"
	"time"
)

// TestTargets: the report's verdicts follow the figures: cross-zone share
// of consumed bytes against 5%, and zone p99 end-to-end against owner +
// 10%, as the median of the rounds' ratios (one noisy round does not
// decide, either way).
func TestTargets(t *testing.T) {
	// mode has one round per value: its p99 is that value (ms).
	mode := func(name string, fetch [3]float64, roundMillis ...int64) *ModeResult {
		m := newModeResult(name)
		m.Counts.proxyFetch = fetch
		for _, ms := range roundMillis {
			if err := m.E2E.RecordValue(ms * 1000); err != nil {
				t.Fatal(err)
			}
			m.RoundP99 = append(m.RoundP99, ms*1000)
		}
		return m
	}
	owner := []int64{100, 100, 100}
	cases := []struct {
		name      string
		zoneFetch [3]float64
		zoneRound []int64
		want      [2]string
	}{
		{"both met", [3]float64{99, 1, 0}, []int64{105, 105, 105}, [2]string{"met", "met"}},
		{"cross-zone above 5%", [3]float64{90, 10, 0}, []int64{100, 100, 100}, [2]string{"MISSED", "met"}},
		{"latency above owner + 10%", [3]float64{100, 0, 0}, []int64{120, 120, 120}, [2]string{"met", "MISSED"}},
		{"one slow round does not miss", [3]float64{100, 0, 0}, []int64{300, 100, 105}, [2]string{"met", "met"}},
		{"one fast round does not meet", [3]float64{100, 0, 0}, []int64{50, 130, 125}, [2]string{"met", "MISSED"}},
		{"nothing fetched", [3]float64{}, []int64{100, 100, 100}, [2]string{"MISSED", "met"}},
		{"no rounds", [3]float64{100, 0, 0}, nil, [2]string{"met", "MISSED"}},
	}
	for _, c := range cases {
		r := &Report{Config: Config{}.withDefaults(), Modes: map[string]*ModeResult{
			"owner": mode("owner", [3]float64{33, 67, 0}, owner...),
			"zone":  mode("zone", c.zoneFetch, c.zoneRound...),
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
