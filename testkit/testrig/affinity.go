package testrig

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetAffinity pins every thread of process pid to cpus. Threads a pinned
// thread creates inherit its mask, but one an unpinned thread creates while
// this runs does not: the threads are therefore listed again until a pass
// finds none left unpinned (bounded, since a Go process stops creating
// threads soon after it starts).
func SetAffinity(pid int, cpus []int) error {
	var want unix.CPUSet
	for _, c := range cpus {
		want.Set(c)
	}
	for range 20 {
		tids, err := threads(pid)
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			var have unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &have); err != nil {
				continue // the thread ended
			}
			if have == want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &want); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pin thread %d of %d to CPUs %v: %w", tid, pid, cpus, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("pin %d to CPUs %v: threads kept appearing unpinned", pid, cpus)
}

func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("threads of %d: %w", pid, err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// AllCPUs are the machine's online CPUs as the Go runtime counts them.
func AllCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return []int{0}
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
