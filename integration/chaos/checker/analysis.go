package checker

import (
	"github.com/kproxy/kproxy/integration/chaos/history"
)

// pos is a partition offset.
type pos struct {
	p int32
	o int64
}

// send is one produce and what became of it.
type send struct {
	inv     history.Op
	done    *history.Op
	outcome history.Type
	ack     pos // set when outcome is OK
}

// finalRead is one proxy's final read of one partition.
type finalRead struct {
	via      string
	inv      history.Op
	done     *history.Op
	complete bool
	hwm      int64
	byOffset map[int64]string
}

// analysis indexes a history for the checks.
type analysis struct {
	sends     map[string]*send
	sendOrder []*send
	// seen holds every value claimed at a position, by acknowledgements,
	// polls and final reads, with the first op that claimed it.
	seen map[pos]map[string]int64
	// readAt holds where polls and final reads saw each value.
	readAt map[string]map[pos]int64
	// polledAt holds where polls (not final reads) saw each value.
	polledAt map[string]map[pos]int64
	// finals holds final reads by partition.
	finals map[int32][]*finalRead
	// finalAt holds where complete final reads saw each value.
	finalAt map[string]map[pos]int64
	polls   []history.Pair
	faults  map[string]int
	stats   Stats
	orphans []history.Op
}

func newAnalysis(ops []history.Op) *analysis {
	a := &analysis{
		sends:    map[string]*send{},
		seen:     map[pos]map[string]int64{},
		readAt:   map[string]map[pos]int64{},
		polledAt: map[string]map[pos]int64{},
		finals:   map[int32][]*finalRead{},
		finalAt:  map[string]map[pos]int64{},
		faults:   map[string]int{},
	}
	pairs, orphans := history.Pairs(ops)
	a.orphans = orphans
	for _, pr := range pairs {
		switch pr.Invoke.F {
		case history.Send:
			a.addSend(pr)
		case history.Poll:
			a.addPoll(pr)
		case history.FinalRead:
			a.addFinal(pr)
		case history.Fault:
			a.faults[pr.Invoke.Fault]++
			a.stats.Faults++
		}
	}
	a.stats.DistinctValues = len(a.readAt)
	return a
}

func (a *analysis) addSend(pr history.Pair) {
	s := &send{inv: pr.Invoke, done: pr.Complete, outcome: pr.Outcome()}
	a.stats.Sends++
	if s.inv.Idempotent {
		a.stats.SendsIdempotent++
	}
	switch s.outcome {
	case history.OK:
		a.stats.SendsOK++
		s.ack = pos{s.done.Partition, s.done.Offset}
		if s.ack.o < 0 {
			// Acknowledged without an offset (a client reports -1, for
			// example for a DUPLICATE_SEQUENCE_NUMBER answer): the value
			// must still be in the log, but the ack claims no position.
			a.stats.AckedNoOffset++
		} else {
			a.claim(s.ack, s.inv.Value, s.done.Index)
		}
	case history.Fail:
		a.stats.SendsFail++
	default:
		a.stats.SendsInfo++
	}
	// Values are unique per send; a repeated value is a workload bug, and
	// the first send keeps the value so evidence stays stable.
	if _, dup := a.sends[s.inv.Value]; !dup {
		a.sends[s.inv.Value] = s
	}
	a.sendOrder = append(a.sendOrder, s)
}

func (a *analysis) addPoll(pr history.Pair) {
	a.stats.Polls++
	a.polls = append(a.polls, pr)
	if pr.Complete == nil {
		return
	}
	for _, r := range pr.Complete.Records {
		a.stats.PolledRecords++
		p := pos{r.Partition, r.Offset}
		a.claim(p, r.Value, pr.Complete.Index)
		note(a.readAt, r.Value, p, pr.Complete.Index)
		note(a.polledAt, r.Value, p, pr.Complete.Index)
	}
}

func (a *analysis) addFinal(pr history.Pair) {
	a.stats.FinalReads++
	f := &finalRead{via: pr.Invoke.Via, inv: pr.Invoke, done: pr.Complete, hwm: -1, byOffset: map[int64]string{}}
	a.finals[pr.Invoke.Partition] = append(a.finals[pr.Invoke.Partition], f)
	if pr.Complete == nil {
		return
	}
	f.complete = pr.Complete.Type == history.OK
	for _, w := range pr.Complete.Watermarks {
		if w.Partition == pr.Invoke.Partition {
			f.hwm = w.HWM
		}
	}
	for _, r := range pr.Complete.Records {
		a.stats.FinalRecords++
		p := pos{r.Partition, r.Offset}
		a.claim(p, r.Value, pr.Complete.Index)
		note(a.readAt, r.Value, p, pr.Complete.Index)
		if r.Partition == pr.Invoke.Partition {
			f.byOffset[r.Offset] = r.Value
		}
	}
}

// markFinal records the complete final reads' sightings; it runs after
// checkFinalReads decided which reads are complete.
func (a *analysis) markFinal() {
	for _, fs := range a.finals {
		for _, f := range fs {
			if !f.complete {
				continue
			}
			for o, v := range f.byOffset {
				note(a.finalAt, v, pos{f.inv.Partition, o}, f.done.Index)
			}
		}
	}
}

func (a *analysis) claim(p pos, value string, op int64) {
	m := a.seen[p]
	if m == nil {
		m = map[string]int64{}
		a.seen[p] = m
	}
	if _, ok := m[value]; !ok {
		m[value] = op
	}
}

func note(idx map[string]map[pos]int64, value string, p pos, op int64) {
	m := idx[value]
	if m == nil {
		m = map[pos]int64{}
		idx[value] = m
	}
	if _, ok := m[p]; !ok {
		m[p] = op
	}
}

// finalized reports whether partition p has at least one complete final read.
func (a *analysis) finalized(p int32) bool {
	for _, f := range a.finals[p] {
		if f.complete {
			return true
		}
	}
	return false
}

func (a *analysis) partitionStats() map[int32]PStats {
	out := map[int32]PStats{}
	for _, s := range a.sendOrder {
		if s.outcome == history.OK {
			ps, ok := out[s.ack.p]
			if !ok {
				ps.FinalHWM = -1
			}
			ps.AckedSends++
			out[s.ack.p] = ps
		}
	}
	for p, fs := range a.finals {
		ps, ok := out[p]
		if !ok {
			ps.FinalHWM = -1
		}
		for _, f := range fs {
			if f.hwm > ps.FinalHWM {
				ps.FinalHWM = f.hwm
			}
		}
		out[p] = ps
	}
	return out
}
