package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestOneLinePerReasonPerInterval(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	l := New(slog.New(slog.NewTextHandler(&out, nil)), slog.LevelWarn, 10*time.Second, func() time.Time { return now })

	steps := []struct {
		advance time.Duration
		reason  string
		wrote   bool
	}{
		{0, "a", true},
		{time.Second, "a", false},
		{time.Second, "a", false},
		{0, "b", true}, // reasons are independent
		{9 * time.Second, "a", true},
		{time.Second, "a", false},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := l.Log(s.reason, "bad input", "n", i); got != s.wrote {
			t.Fatalf("step %d (%s): wrote %v, want %v", i, s.reason, got, s.wrote)
		}
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out.String())
	}
	if strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[2], "suppressed=2") {
		t.Fatalf("suppressed counts wrong:\n%s", out.String())
	}
	if !strings.Contains(lines[2], "reason=a") || !strings.Contains(lines[2], "level=WARN") {
		t.Fatalf("line lacks reason or level: %s", lines[2])
	}
}
