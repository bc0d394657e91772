package progress

import (
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestReportLinesAndFlooding(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var out strings.Builder
	p := New(&out, "bench", 10*time.Second, c.now)
	steps := []struct {
		advance time.Duration
		pos     Position
		want    string // "" : nothing printed
	}{
		{0, Position{Stage: "memory", Done: 0}, "bench: memory, elapsed 0s, remaining unknown"},
		{time.Second, Position{Stage: "memory", Done: 0.01}, ""}, // same stage within 10s
		{30 * time.Second, Position{Stage: "produce-1k", Round: 1, Rounds: 4, Done: 0.25}, "bench: produce-1k, round 1/4, elapsed 31s, remaining ~1m33s"},
		{2 * time.Second, Position{Stage: "produce-1k", Round: 2, Rounds: 4, Done: 0.3}, ""},
		{9 * time.Second, Position{Stage: "produce-1k", Round: 3, Rounds: 4, Done: 0.5}, "bench: produce-1k, round 3/4, elapsed 42s, remaining ~42s"},
		{time.Second, Position{Stage: "fetch", Done: 1}, "bench: fetch, elapsed 43s, remaining 0s"}, // a new stage prints at once
		{17 * time.Second, Position{Stage: "heal", Remaining: 2 * time.Minute}, "bench: heal, elapsed 1m, remaining 2m"},
		{103 * time.Second, Position{Stage: "faults (kill-broker)", Round: 7, Remaining: 3*time.Minute + 20*time.Second}, "bench: faults (kill-broker), round 7, elapsed 2m43s, remaining 3m20s"},
	}
	for i, s := range steps {
		c.advance(s.advance)
		before := out.Len()
		p.Report(s.pos)
		got := strings.TrimSuffix(out.String()[before:], "\n")
		if got != s.want {
			t.Errorf("step %d: printed %q, want %q", i, got, s.want)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Errorf("%d lines, want 6:\n%s", n, out.String())
	}
}

func TestNilPrinterPrintsNothing(t *testing.T) {
	var p *Printer
	p.Report(Position{Stage: "x"}) // must not panic
	var zero Printer
	zero.Report(Position{Stage: "x"})
}

// TestManyReportsFewLines: a loop that reports on every iteration for an
// hour of fake time prints one line per interval.
func TestManyReportsFewLines(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var out strings.Builder
	p := New(&out, "chaos", 10*time.Second, c.now)
	for i := range 3600 * 10 {
		p.Report(Position{Stage: "faults", Round: i / 100, Remaining: time.Hour - time.Duration(i)*100*time.Millisecond})
		c.advance(100 * time.Millisecond)
	}
	if n := strings.Count(out.String(), "\n"); n != 360 {
		t.Fatalf("%d lines for an hour at one per 10s, want 360", n)
	}
}
