package scale

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/progress"
)

// TestProgressLines: each phase of each size, and the simulation, get one
// line naming the phase and the size's round, with "remaining" estimated
// from the phases done.
func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	r := &runner{cfg: Config{Sizes: []int{10, 20}, SimBrokers: 5,
		Progress: progress.New(&out, "scale", time.Hour, clock)}}
	for i, n := range r.cfg.Sizes {
		for _, phase := range []string{"start", "cold start", "proxies", "kill"} {
			now = now.Add(time.Second)
			r.at(phaseName(n, phase), i+1)
		}
	}
	now = now.Add(time.Second)
	r.at("simulation of 5 brokers", 0)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := 2*phasesPerSize + 1; len(lines) != want {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), want, out.String())
	}
	for i, want := range map[int]string{
		0: "scale: 10 partitions: start, round 1/2, elapsed 1s",
		// 4 of 9 phases done in 5 s: about 11 s in all.
		4: "scale: 20 partitions: start, round 2/2, elapsed 5s, remaining ~6s",
		8: "scale: simulation of 5 brokers, elapsed 9s, remaining ~1s",
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
}

func phaseName(n int, phase string) string { return fmt.Sprintf("%d partitions: %s", n, phase) }
