package testrig

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
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
	// Ready, if set, is a line (substring) the process prints to its log
	// once it serves; Start waits for it.
	Ready string
	// CaptureStdout keeps stdout out of the log: ReadLine reads it (a
	// program that answers with a result line, such as kbench). Up to 16
	// unread lines are buffered; past that the child waits on its writes.
	CaptureStdout bool
	// CPUs, if set, are the CPUs every thread of the process may run on
	// (see SetAffinity); SetCPUs changes them for later starts too.
	CPUs []int
}

// Proc supervises one process: each instance runs in its own process group,
// so that kill -9, SIGSTOP and SIGCONT reach the whole group, and appends
// its output to a log file that survives restarts. It can be started again
// after it ended. Each instance gets a stdin pipe that Stop and Kill close
// first: a child started with --exit-on-stdin-eof then ends by itself.
//
// The promise: Kill and Stop wait until the instance is reaped, also when it
// was paused, so a restart never races the old instance for its ports.
type Proc struct {
	spec Spec

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current (or last) instance was reaped
	stdin    io.WriteCloser
	out      *stdoutLines // the current instance's captured stdout, or nil
	paused   bool
	starts   int
	lastErr  error
	lastUsed time.Duration // CPU time of the last reaped instance
}

// NewProc returns a supervisor for spec; nothing runs until Start.
func NewProc(spec Spec) *Proc { return &Proc{spec: spec} }

// Name is the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// Command is the command line, for reports.
func (p *Proc) Command() string {
	return strings.Join(append([]string{p.spec.Path}, p.spec.Args...), " ")
}

// Start runs the process and, if the spec has a Ready line, waits for it
// until ctx ends (then the process is killed).
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: already running", p.spec.Name)
	}
	done, ready, err := p.startLocked()
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if p.spec.Ready == "" {
		return nil
	}
	select {
	case <-ready.found:
		return nil
	case <-done:
		return fmt.Errorf("start %s: exited before ready: %v (log: %s)", p.spec.Name, p.Err(), p.Tail())
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("start %s: not ready: %w (see %s)", p.spec.Name, ctx.Err(), p.spec.LogPath)
	}
}

// Args returns the command line's arguments.
func (p *Proc) Args() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.spec.Args)
}

// SetArgs replaces the command line's arguments for later starts.
func (p *Proc) SetArgs(args []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spec.Args = slices.Clone(args)
}

func (p *Proc) startLocked() (chan struct{}, *lineWatcher, error) {
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logw, closeLog, err := p.openLog()
	if err != nil {
		return nil, nil, err
	}
	ready := newLineWatcher(logw, p.spec.Ready)
	cmd.Stdout, cmd.Stderr = ready, ready
	var out *stdoutLines
	var stdoutW *os.File
	if p.spec.CaptureStdout {
		// An os.Pipe rather than cmd.StdoutPipe: Wait closes the latter as
		// soon as the process exits, losing a last line not yet read.
		var r *os.File
		if r, stdoutW, err = os.Pipe(); err != nil {
			closeLog()
			return nil, nil, fmt.Errorf("stdout pipe of %s: %w", p.spec.Name, err)
		}
		out = readLines(r)
		cmd.Stdout = stdoutW
	}
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if stdoutW != nil {
		stdoutW.Close() // the child has its own copy
	}
	if err != nil {
		closeLog()
		out.close()
		return nil, nil, fmt.Errorf("start %s (%s): %w", p.spec.Name, p.spec.Path, err)
	}
	if len(p.spec.CPUs) > 0 {
		if err := SetAffinity(cmd.Process.Pid, p.spec.CPUs); err != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			closeLog()
			out.close()
			return nil, nil, fmt.Errorf("start %s: %w", p.spec.Name, err)
		}
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stdin, p.out, p.paused = cmd, done, stdin, out, false
	p.starts++
	go func() { // owner: this Proc; ends when the process is reaped
		err := cmd.Wait()
		closeLog()
		p.mu.Lock()
		p.lastErr = err
		if st := cmd.ProcessState; st != nil {
			p.lastUsed = st.UserTime() + st.SystemTime()
		}
		if p.cmd == cmd {
			p.cmd = nil
		}
		p.mu.Unlock()
		close(done)
	}()
	return done, ready, nil
}

func (p *Proc) openLog() (io.Writer, func(), error) {
	if p.spec.LogPath == "" {
		return io.Discard, func() {}, nil
	}
	f, err := os.OpenFile(p.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log of %s: %w", p.spec.Name, err)
	}
	fmt.Fprintf(f, "=== testrig: start %d of %s at %s\n", p.starts+1, p.Command(), time.Now().Format(time.RFC3339Nano))
	return f, func() { f.Close() }, nil
}

// SetCPUs pins the running instance, if any, and every later start to cpus
// (nil: every CPU the machine has).
func (p *Proc) SetCPUs(cpus []int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spec.CPUs = cpus
	if p.cmd == nil {
		return nil
	}
	if cpus == nil {
		cpus = AllCPUs()
	}
	return SetAffinity(p.cmd.Process.Pid, cpus)
}

// Err is the exit status of the last instance that ended.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// CPUUsed is the user and system CPU time of the last instance that ended.
func (p *Proc) CPUUsed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastUsed
}

// Done is closed when the current instance has been reaped (at once if
// none was ever started).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return p.done
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

// ReadLine reads the next line of the current instance's captured stdout,
// giving up when ctx ends or the output ends first.
func (p *Proc) ReadLine(ctx context.Context) (string, error) {
	p.mu.Lock()
	out := p.out
	p.mu.Unlock()
	if out == nil {
		return "", fmt.Errorf("%s: stdout not captured", p.spec.Name)
	}
	select {
	case l, ok := <-out.lines:
		if !ok {
			return "", fmt.Errorf("%s stdout: %w (log: %s)", p.spec.Name, io.EOF, p.Tail())
		}
		return strings.TrimSpace(l), nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s: no output line: %w", p.spec.Name, ctx.Err())
	}
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
	defer p.closePipes(p.pipes())
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

// Stop asks the process to end (stdin closed, SIGCONT, SIGTERM) and kills
// it if it has not ended within grace; that is an error.
func (p *Proc) Stop(grace time.Duration) error {
	stdin, out := p.pipes()
	defer p.closePipes(stdin, out)
	if stdin != nil {
		stdin.Close()
	}
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
	}
	if err := p.Kill(); err != nil {
		return err
	}
	return fmt.Errorf("%s did not stop within %s; killed", p.spec.Name, grace)
}

// pipes are the current instance's stdin and captured stdout.
func (p *Proc) pipes() (io.WriteCloser, *stdoutLines) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdin, p.out
}

// closePipes releases an instance's stdin and captured stdout; a pending
// ReadLine then fails. Taking them before the signal keeps a restart's new
// pipes open.
func (p *Proc) closePipes(stdin io.WriteCloser, out *stdoutLines) {
	if stdin != nil {
		stdin.Close()
	}
	out.close()
}

// Tail is the end of the process's log, for error messages.
func (p *Proc) Tail() string {
	if p.spec.LogPath == "" {
		return "(no log)"
	}
	b, err := os.ReadFile(p.spec.LogPath)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stdoutLines reads one instance's captured stdout into lines.
type stdoutLines struct {
	r     *os.File
	lines chan string // closed at EOF or close
	quit  chan struct{}
	once  sync.Once
}

func readLines(r *os.File) *stdoutLines {
	s := &stdoutLines{r: r, lines: make(chan string, 16), quit: make(chan struct{})}
	go func() { // owner: the Proc; ends at EOF (the child exited) or close
		defer close(s.lines)
		defer r.Close()
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				select {
				case s.lines <- l:
				case <-s.quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *stdoutLines) close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		close(s.quit)
		s.r.Close()
	})
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
