package chaos

import (
	"time"

	"github.com/kproxy/kproxy/testkit/progress"
)

// at reports a phase of the run, and for the fault phase its cycle. left is
// the fault time left (0 outside the faults); the phases after the faults
// add at least their fixed waits (four lease TTLs and a second), so
// "remaining" is a lower bound: the heal, the drain and the final read take
// what they take.
func (r *runner) at(phase string, cycle int, left time.Duration) {
	after := 4*r.opt.LeaseTTL + time.Second
	var remaining time.Duration
	switch phase {
	case "start cluster", "workload":
		remaining = r.opt.Duration + after
	case "recovery":
		remaining = after
	case "final read and check":
	default: // a fault
		remaining = left + after
	}
	r.opt.Progress.Report(progress.Position{Stage: r.opt.Name + " " + phase, Round: cycle, Remaining: remaining})
}
