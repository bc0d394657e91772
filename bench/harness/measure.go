package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

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
