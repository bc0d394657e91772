package compat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// maxLines bounds what a subprocess may print before the harness calls it
// broken; the largest run prints a few thousand lines.
const maxLines = 100000

// proc is a client subprocess (kcat, node) whose stdout is read as lines.
// It is killed when the context it was started with ends: every capability
// runs under its own context, cancelled when the capability returns.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // closed once stdout hits EOF

	stderrMu sync.Mutex
	stderr   []byte // last 8 KiB

	done    chan struct{} // closed when the process has exited
	waitErr error
}

func startProc(ctx context.Context, name string, args []string, env []string) (*proc, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	// If the test binary dies (a -timeout panic), take the client with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	cmd.WaitDelay = 5 * time.Second
	p := &proc{name: name, cmd: cmd, lines: make(chan string, maxLines), done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s: stdin: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: stdout: %w", name, err)
	}
	cmd.Stderr = (*stderrTail)(p)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // over maxLines: dropped; the checks will see missing records
			}
		}
	}()
	go func() {
		<-readDone // Wait closes stdout; read it all first
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill ends the process (by its pid, never by name) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// stop asks the process to exit (SIGTERM: kcat and the node script shut down
// cleanly, committing offsets), and kills it if it has not within ctx.
func (p *proc) stop(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitErr()
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitErr()
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("%s did not exit after SIGTERM: killed (stderr: %s)", p.name, p.stderrTail())
	}
}

// wait waits for the process to exit by itself.
func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitErr()
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("%s still running: killed: %w (stderr: %s)", p.name, ctx.Err(), p.stderrTail())
	}
}

func (p *proc) exitErr() error {
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) && ee.ExitCode() == -1 {
		// Killed by a signal: by SIGTERM after stop this is a clean exit
		// for a process that does not trap it.
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s: %w (stderr: %s)", p.name, p.waitErr, p.stderrTail())
	}
	return nil
}

type stderrTail proc

func (s *stderrTail) Write(b []byte) (int, error) {
	s.stderrMu.Lock()
	defer s.stderrMu.Unlock()
	s.stderr = append(s.stderr, b...)
	if len(s.stderr) > 8192 {
		s.stderr = s.stderr[len(s.stderr)-8192:]
	}
	return len(b), nil
}

func (p *proc) stderrTail() string {
	p.stderrMu.Lock()
	defer p.stderrMu.Unlock()
	s := strings.TrimSpace(string(p.stderr))
	if len(s) > 1500 {
		s = "…" + s[len(s)-1500:]
	}
	return s
}
