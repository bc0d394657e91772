package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/testtools/testrig"
)

// runDevSecure runs `kproxy dev --secure` with one broker in dir until the
// test ends, and waits (at most 60 s) for its printed help to match line;
// it returns line's submatches and what dev had printed by then. The cluster is stopped, and its exit
// checked, when the test's cleanups run.
func runDevSecure(t *testing.T, ctx context.Context, dir string, line *regexp.Regexp) (match []string, printed string) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	var out testrig.SyncBuffer
	app := newApp()
	app.Writer = &out
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(runCtx, []string{"kproxy", "dev", "--secure", "--brokers", "1", "--data-dir", dir,
			"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--secure-listen", "127.0.0.1:0", "--log-level", "warn"})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		printed := out.String()
		if m := line.FindStringSubmatch(printed); m != nil {
			return m, printed
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s in the output:\n%s", line, out.String())
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("dev exited: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
