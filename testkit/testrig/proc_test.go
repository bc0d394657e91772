package testrig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// state reads a process's state letter from /proc (R, S, T, Z...).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return strings.Fields(s[i+1:])[0]
}

func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if state(t, pid) == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d state %q, want %q", pid, state(t, pid), want)
}

func TestLifecycle(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	p := NewProc(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "echo hello; echo up and ready; exec sleep 60"},
		LogPath: log, Ready: "ready"})
	t.Cleanup(func() { p.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err == nil {
		t.Fatal("second Start while running should fail")
	}
	pid := p.Pid()
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	waitState(t, pid, "T")
	if !p.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	waitState(t, pid, "S")
	// Kill a paused process: it must still be reaped.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.Pid() != 0 {
		t.Fatal("still running after Kill")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Fatalf("pid %d still exists after Kill", pid)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "\nhello\n"); got != 2 {
		t.Fatalf("log holds %d starts' output, want 2:\n%s", got, b)
	}
}

func TestStartFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exits := NewProc(Spec{Name: "exits", Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Ready: "never"})
	if err := exits.Start(ctx); err == nil || !strings.Contains(err.Error(), "exited before ready") {
		t.Fatalf("err = %v", err)
	}
	slow := NewProc(Spec{Name: "slow", Path: "/bin/sh", Args: []string{"-c", "exec sleep 60"}, Ready: "never"})
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if err := slow.Start(short); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v", err)
	}
	if slow.Running() {
		t.Fatal("a process that never got ready must be killed")
	}
	missing := NewProc(Spec{Name: "missing", Path: "/nonexistent/binary"})
	if err := missing.Start(ctx); err == nil {
		t.Fatal("start of a missing binary should fail")
	}
}

// TestCapturedStdout: the result line on stdout is read apart from the log.
func TestCapturedStdout(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	p := NewProc(Spec{Name: "sh", Path: "/bin/sh", CaptureStdout: true, LogPath: log,
		Args: []string{"-c", "echo to-log >&2; echo '{\"n\": 1}'; exec sleep 60"}})
	t.Cleanup(func() { p.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	line, err := p.ReadLine(ctx)
	if err != nil || line != `{"n": 1}` {
		t.Fatalf("ReadLine = %q, %v", line, err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nto-log\n") || strings.Contains(string(b), "\n{\"n\": 1}\n") {
		t.Fatalf("log holds the wrong output:\n%s", b)
	}
	if _, err := p.ReadLine(ctx); err == nil {
		t.Fatal("ReadLine after the process ended should fail")
	}
}
