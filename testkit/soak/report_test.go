package soak

import (
	"strings"
	"testing"
	"time"
)

func TestWhyMissed(t *testing.T) {
	mib := int64(1 << 20)
	samples := []Sample{
		{Phase: PhaseBaseline, RSS: 40 * mib, Heap: 5 * mib, P99: 30 * time.Millisecond, Acked: 10},
		{Phase: PhaseBaseline, RSS: 40 * mib, Heap: 5 * mib, P99: 200 * time.Millisecond, Acked: 10},
		{Phase: PhaseHostile, Pattern: "half_sent_frame", RSS: 76 * mib, Heap: 23 * mib, P99: 900 * time.Millisecond, Acked: 10},
		{Phase: PhaseCoolDown, RSS: 45 * mib, Heap: 5 * mib, P99: 50 * time.Millisecond, Acked: 10},
	}
	cases := []struct {
		name string
		t    Targets
		want []string // substrings; none when empty
	}{
		{"all met", Targets{RSSOK: true, P99OK: true}, nil},
		{"rss", Targets{RSSWarm: 40 * mib, RSSEnd: 45 * mib, P99OK: true}, []string{"live at the end is 5 MiB, against 5 MiB", "other 5 MiB"}},
		{"p99", Targets{RSSOK: true}, []string{"ranged from 30.0 to 200.0 ms"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := (&Result{Samples: samples}).whyMissed(c.t)
			if len(c.want) == 0 && got != "" {
				t.Fatalf("no target missed, got %q", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in:\n%s", w, got)
				}
			}
			if strings.Contains(got, "900.0") {
				t.Errorf("a hostile window counted as quiet:\n%s", got)
			}
		})
	}
}
