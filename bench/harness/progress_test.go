package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/progress"
)

// TestProgressLines: scenario starts and rounds become progress lines whose
// estimate counts the selected scenarios as equal parts.
func TestProgressLines(t *testing.T) {
	now := time.Unix(0, 0)
	var out strings.Builder
	h := &Harness{cfg: Config{Only: []string{"produce-1k", "fetch"}, Rounds: 2,
		Progress: progress.New(&out, "bench", time.Nanosecond, func() time.Time { return now })}}
	step := func(d time.Duration, f func()) {
		now = now.Add(d)
		f()
	}
	step(0, func() { h.at("produce-1k", 0, 0) })
	step(10*time.Second, func() { h.at(h.scenario, 1, 2) })
	step(10*time.Second, func() { h.at(h.scenario, 2, 2) })
	step(10*time.Second, func() { h.at("fetch", 0, 0) })
	want := []string{
		"bench: produce-1k, elapsed 0s, remaining unknown",
		"bench: produce-1k, round 1/2, elapsed 10s, remaining unknown",
		"bench: produce-1k, round 2/2, elapsed 20s, remaining ~1m", // a quarter done
		"bench: fetch, elapsed 30s, remaining ~30s",                // half done
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
