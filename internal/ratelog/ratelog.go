// Package ratelog writes at most one log line per reason per interval, so
// that a hostile or broken client cannot flood the log. The first event of a
// reason is logged at once; later ones within the interval are only counted,
// and the next line written for that reason carries how many were left out
// ("suppressed"). It keeps no goroutine: a count left over when events stop
// is not written (the caller's metrics have the exact totals).
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Logger rate-limits lines by reason. The zero value is not usable; use New.
type Logger struct {
	log      *slog.Logger
	level    slog.Level
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	reasons map[string]*entry
}

type entry struct {
	last       time.Time
	suppressed int
}

// maxReasons bounds the map: reasons are a fixed set chosen by the caller,
// never client input, but a bound keeps a mistake from growing memory.
const maxReasons = 1024

// New returns a Logger writing to log at level, one line per reason per
// interval. now is the clock (nil: time.Now).
func New(log *slog.Logger, level slog.Level, interval time.Duration, now func() time.Time) *Logger {
	if now == nil {
		now = time.Now
	}
	return &Logger{log: log, level: level, interval: interval, now: now, reasons: make(map[string]*entry)}
}

// Log writes msg with the reason and args unless a line for reason was
// written less than an interval ago; it reports whether it wrote.
func (l *Logger) Log(reason, msg string, args ...any) bool {
	t := l.now()
	l.mu.Lock()
	e := l.reasons[reason]
	if e == nil {
		if len(l.reasons) >= maxReasons {
			clear(l.reasons)
		}
		e = &entry{}
		l.reasons[reason] = e
	} else if t.Sub(e.last) < l.interval {
		e.suppressed++
		l.mu.Unlock()
		return false
	}
	suppressed := e.suppressed
	e.last, e.suppressed = t, 0
	l.mu.Unlock()
	attrs := append([]any{"reason", reason}, args...)
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.log.Log(context.Background(), l.level, msg, attrs...)
	return true
}
