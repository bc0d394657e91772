package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

// Proc is a child process whose output goes to a log file.
type Proc struct {
	Name    string
	Args    []string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdoutR *os.File      // read end of the stdout pipe; nil unless captured
	stdout  *bufio.Reader // buffers stdoutR
	done    chan struct{}
	waitErr error
	logPath string
}

// startProc starts bin with args; stderr (and stdout unless captureStdout)
// go to dir/name.log. The child dies with the harness (Pdeathsig) and gets
// a stdin pipe that the harness closes on Stop.
func startProc(dir, name string, captureStdout bool, bin string, args ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file for %s: %w", name, err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &Proc{Name: name, Args: append([]string{bin}, args...), cmd: cmd, done: make(chan struct{}), logPath: logPath}
	// An os.Pipe rather than cmd.StdoutPipe: Wait closes the latter as soon
	// as the process exits, losing a last line not yet read.
	var stdoutW *os.File
	if captureStdout {
		if p.stdoutR, stdoutW, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("stdout pipe of %s: %w", name, err)
		}
		p.stdout = bufio.NewReaderSize(p.stdoutR, 1<<20)
		cmd.Stdout = stdoutW
	} else {
		cmd.Stdout = logf
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		p.closeStdout()
		stdoutW.Close()
		return nil, fmt.Errorf("stdin of %s: %w", name, err)
	}
	err = cmd.Start()
	if stdoutW != nil {
		stdoutW.Close() // the child has its own copy
	}
	if err != nil {
		p.closeStdout()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// cpuUsed is the CPU time the process used; valid once Done is closed.
func (p *Proc) cpuUsed() time.Duration {
	if st := p.cmd.ProcessState; st != nil {
		return st.UserTime() + st.SystemTime()
	}
	return 0
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit status once Done is closed.
func (p *Proc) Err() error { return p.waitErr }

// Command is the command line, for the report.
func (p *Proc) Command() string { return strings.Join(p.Args, " ") }

// readLine reads one line of captured stdout, giving up at ctx's end or when
// the process exits first.
func (p *Proc) readLine(ctx context.Context) (string, error) {
	if p.stdout == nil {
		return "", errors.New("stdout not captured")
	}
	type line struct {
		s   string
		err error
	}
	lc := make(chan line, 1)
	go func() { // ends when the process's stdout closes at the latest
		s, err := p.stdout.ReadString('\n')
		lc <- line{s, err}
	}()
	select {
	case l := <-lc:
		if l.err != nil {
			return "", fmt.Errorf("%s stdout: %w (log: %s)", p.Name, l.err, p.tail())
		}
		return strings.TrimSpace(l.s), nil
	case <-ctx.Done():
		return "", fmt.Errorf("%s: no output line: %w", p.Name, ctx.Err())
	}
}

// Stop closes stdin, sends SIGTERM and waits up to grace, then SIGKILL.
func (p *Proc) Stop(grace time.Duration) error {
	defer p.closeStdout()
	p.stdin.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not stop within %s; killed", p.Name, grace)
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	defer p.closeStdout()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// closeStdout releases the captured stdout; a pending readLine then fails.
func (p *Proc) closeStdout() {
	if p.stdoutR != nil {
		p.stdoutR.Close()
	}
}

// tail is the end of the process's log, for error messages.
func (p *Proc) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // utime and stime are fields 14 and 15, here 11 and 12
		return 0, fmt.Errorf("stat of %d: %d fields", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// rssBytes is the resident set size of the process.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("status of %d: no VmRSS", pid)
}

// raiseFileLimit lifts the soft open-file limit to the hard one for the
// harness and, because it calls Setrlimit itself, for its children too (Go
// restores the original soft limit in children unless the program set it).
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("setrlimit nofile %d: %w", lim.Max, err)
	}
	return lim.Cur, nil
}
