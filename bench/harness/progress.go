package harness

import (
	"slices"

	"github.com/kproxy/kproxy/testkit/progress"
)

// at reports that scenario id is at round of rounds (0 of 0: starting, or
// no rounds). The fraction done counts scenarios as equal parts of the run,
// so "remaining" is a rough estimate: scenarios differ in length.
func (h *Harness) at(id string, round, rounds int) {
	h.scenario = id
	list := h.cfg.selectedList()
	done := 0.0
	if i := slices.Index(list, id); i >= 0 {
		part := 0.0
		if rounds > 0 && round > 0 {
			part = float64(round-1) / float64(rounds)
		}
		done = (float64(i) + part) / float64(len(list))
	}
	h.cfg.Progress.Report(progress.Position{Stage: id, Round: round, Rounds: rounds, Done: done})
}
