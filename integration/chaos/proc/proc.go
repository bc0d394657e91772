// Package proc supervises the operating system processes of a fault test:
// it starts each in its own process group, so that kill -9, SIGSTOP and
// SIGCONT reach the whole group, and appends its output to a log file that
// survives restarts.
//
// The promise: a process started here is ended by Close (or by the test
// process dying: children get SIGKILL through the parent-death signal), also
// when it was paused; Kill and Stop wait until the process is reaped, so a
// restart never races the old instance for its ports.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec says how to run a process.
type Spec struct {
	Name    string // for logs and errors, e.g. "broker-2"
	Path    string
	Args    []string
	Env     []string // added to the current environment
	LogPath string   // stdout and stderr are appended here ("" discards)
	// Ready, if set, is a line (substring) the process prints on stdout or
	// stderr once it serves; Start waits for it.
	Ready string
}

// Proc is one supervised process; it can be started again after it ended.
type Proc struct {
	spec Spec

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current instance was reaped
	paused  bool
	starts  int
	lastErr error
}

// New returns a supervisor for spec; nothing runs until Start.
func New(spec Spec) *Proc { return &Proc{spec: spec} }

// Name is the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// Start runs the process and, if the spec has a Ready line, waits for it
// until ctx ends (then the process is killed).
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: already running", p.spec.Name)
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, closeOut, err := p.output()
	if err != nil {
		p.mu.Unlock()
		return err
	}
	ready := newLineWatcher(out, p.spec.Ready)
	cmd.Stdout, cmd.Stderr = ready, ready
	if err := cmd.Start(); err != nil {
		closeOut()
		p.mu.Unlock()
		return fmt.Errorf("start %s (%s): %w", p.spec.Name, p.spec.Path, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused = cmd, done, false
	p.starts++
	p.mu.Unlock()
	go func() { // owner: this Proc; ends when the process is reaped
		err := cmd.Wait()
		closeOut()
		p.mu.Lock()
		p.lastErr = err
		if p.cmd == cmd {
			p.cmd = nil
		}
		p.mu.Unlock()
		close(done)
	}()
	if p.spec.Ready == "" {
		return nil
	}
	select {
	case <-ready.found:
		return nil
	case <-done:
		return fmt.Errorf("start %s: exited before ready: %v (see %s)", p.spec.Name, p.exitErr(), p.spec.LogPath)
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("start %s: not ready: %w (see %s)", p.spec.Name, ctx.Err(), p.spec.LogPath)
	}
}

func (p *Proc) output() (io.Writer, func(), error) {
	if p.spec.LogPath == "" {
		return io.Discard, func() {}, nil
	}
	f, err := os.OpenFile(p.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log of %s: %w", p.spec.Name, err)
	}
	fmt.Fprintf(f, "=== kchaos: start %d of %s %s at %s\n", p.starts+1, p.spec.Path,
		strings.Join(p.spec.Args, " "), time.Now().Format(time.RFC3339Nano))
	return f, func() { f.Close() }, nil
}

func (p *Proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Running reports whether an instance is running (paused counts as running).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Paused reports whether the running instance was paused with Pause.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && p.paused
}

// Pid is the running instance's process id, 0 if none.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the running instance's process group.
func (p *Proc) signal(sig syscall.Signal) (chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, fmt.Errorf("%s: not running", p.spec.Name)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("signal %s to %s: %w", sig, p.spec.Name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.paused = false
	}
	return p.done, nil
}

// Kill sends SIGKILL to the process group and waits until it is reaped. It
// is a no-op when nothing runs.
func (p *Proc) Kill() error {
	done, err := p.signal(syscall.SIGKILL)
	if err != nil {
		if !p.Running() {
			return nil
		}
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kill %s: not reaped after 30s", p.spec.Name)
	}
}

// Pause sends SIGSTOP to the process group.
func (p *Proc) Pause() error {
	_, err := p.signal(syscall.SIGSTOP)
	return err
}

// Resume sends SIGCONT to the process group.
func (p *Proc) Resume() error {
	_, err := p.signal(syscall.SIGCONT)
	return err
}

// Stop asks the process to end (SIGCONT, then SIGTERM) and kills it if it
// has not ended within grace.
func (p *Proc) Stop(grace time.Duration) error {
	if _, err := p.signal(syscall.SIGCONT); err != nil {
		return nil // not running
	}
	done, err := p.signal(syscall.SIGTERM)
	if err != nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		return p.Kill()
	}
}

// lineWatcher passes output through and signals once a line contains want.
type lineWatcher struct {
	w     io.Writer
	want  string
	mu    sync.Mutex
	tail  string
	found chan struct{}
	hit   bool
}

func newLineWatcher(w io.Writer, want string) *lineWatcher {
	return &lineWatcher{w: w, want: want, found: make(chan struct{})}
}

func (l *lineWatcher) Write(b []byte) (int, error) {
	l.mu.Lock()
	if l.want != "" && !l.hit {
		l.tail += string(b)
		if strings.Contains(l.tail, l.want) {
			l.hit = true
			l.tail = ""
			close(l.found)
		} else if i := strings.LastIndexByte(l.tail, '\n'); i >= 0 {
			l.tail = l.tail[i+1:]
		}
	}
	l.mu.Unlock()
	return l.w.Write(b)
}
