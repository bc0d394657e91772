package harness

import (
	"strings"
	"testing"
)

// TestLoadedLabel: a report is labelled a smoke check when the machine was
// busy before the run began; the load at its end is the run's own (a
// benchmark saturating both cores ends with a load above 2) and says
// nothing about other work.
func TestLoadedLabel(t *testing.T) {
	for _, tc := range []struct {
		start, end string
		loaded     bool
	}{
		{"0.92 3.98 6.28", "4.35 4.26 5.44", false},
		{"5.10 6.00 6.20", "4.35 4.26 5.44", true},
		{"0.20 0.30 0.40", "0.50 0.40 0.30", false},
	} {
		r := &Report{Environment: Environment{Cores: 2, LoadStart: tc.start, LoadEnd: tc.end}}
		if got := strings.Contains(r.markdown(), "Taken on a loaded machine"); got != tc.loaded {
			t.Errorf("load %q to %q: labelled loaded %v, want %v", tc.start, tc.end, got, tc.loaded)
		}
	}
}
