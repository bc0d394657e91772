// Package progress prints where a long run is, one line at a time: the
// stage (a scenario, a fault), the round, the time elapsed and the time
// remaining. It prints at most one line per interval, except that a new
// stage always gets its line, so that a run of many minutes shows it is
// alive without flooding its output. Its limit: "remaining" is only as good
// as what the caller knows (a fixed duration, or the fraction done).
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Position is where a run is.
type Position struct {
	Stage  string
	Round  int // 1-based; 0: no rounds
	Rounds int // 0: unknown
	// Remaining is the time left when the caller knows it; otherwise Done,
	// the fraction of the whole run finished (0 to 1), gives an estimate.
	Remaining time.Duration
	Done      float64
}

// Printer writes progress lines; the zero value and a nil *Printer print
// nothing, so that callers need no checks. It is safe for concurrent use.
type Printer struct {
	w     io.Writer
	name  string
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	start time.Time
	last  time.Time
	stage string
}

// New returns a Printer that writes lines starting with name to w, at most
// one per every (default 10s) for the same stage. now is the clock (nil:
// time.Now); elapsed time counts from New.
func New(w io.Writer, name string, every time.Duration, now func() time.Time) *Printer {
	if every <= 0 {
		every = 10 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Printer{w: w, name: name, every: every, now: now, start: now()}
}

// Report prints pos unless a line for the same stage was printed less than
// the interval ago.
func (p *Printer) Report(pos Position) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if pos.Stage == p.stage && !p.last.IsZero() && now.Sub(p.last) < p.every {
		return
	}
	p.stage, p.last = pos.Stage, now
	_, _ = io.WriteString(p.w, p.line(pos, now.Sub(p.start))) // progress is best effort
}

func (p *Printer) line(pos Position, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", p.name, pos.Stage)
	switch {
	case pos.Round > 0 && pos.Rounds > 0:
		fmt.Fprintf(&b, ", round %d/%d", pos.Round, pos.Rounds)
	case pos.Round > 0:
		fmt.Fprintf(&b, ", round %d", pos.Round)
	}
	fmt.Fprintf(&b, ", elapsed %s, remaining %s\n", short(elapsed), remaining(pos, elapsed))
	return b.String()
}

func remaining(pos Position, elapsed time.Duration) string {
	switch {
	case pos.Remaining > 0:
		return short(pos.Remaining)
	case pos.Done >= 1:
		return "0s"
	case pos.Done > 0:
		return "~" + short(time.Duration(float64(elapsed)*(1-pos.Done)/pos.Done))
	}
	return "unknown"
}

// short rounds d to whole seconds for reading ("2m" rather than "2m0s").
func short(d time.Duration) string {
	d = d.Round(time.Second)
	if d >= time.Minute && d%time.Minute == 0 {
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}
