package checker

import (
	"fmt"
	"sort"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// checkFinalReads decides which final reads are complete: an ok outcome with
// a high watermark and every offset from the log start (the ok outcome's
// Offset) to the high watermark present. Then it compares proxies.
func (a *analysis) checkFinalReads(out *collector) {
	for _, p := range sortedPartitions(a.finals) {
		var complete []*finalRead
		for _, f := range a.finals[p] {
			if reason := f.incompleteReason(); reason != "" {
				f.complete = false
				ops := []int64{f.inv.Index}
				if f.done != nil {
					ops = append(ops, f.done.Index)
				}
				out.add(Anomaly{Kind: IncompleteFinalRead, Partition: p, Offset: -1, Ops: ops,
					Detail: fmt.Sprintf("final read of partition %d via %s: %s", p, f.via, reason)})
				continue
			}
			complete = append(complete, f)
		}
		for i := 1; i < len(complete); i++ {
			a.compareFinals(out, p, complete[0], complete[i])
		}
	}
	// A partition that was written to must have been read at the end.
	reported := map[int32]bool{}
	for _, s := range a.sendOrder {
		p := s.inv.Partition
		if s.outcome == history.OK && len(a.finals[p]) == 0 && !reported[p] {
			reported[p] = true
			out.add(Anomaly{Kind: IncompleteFinalRead, Partition: p, Offset: -1, Ops: []int64{s.done.Index},
				Detail: fmt.Sprintf("partition %d has acknowledged sends but no final read", p)})
		}
	}
	a.markFinal()
}

func (f *finalRead) incompleteReason() string {
	if f.done == nil {
		return "no outcome recorded"
	}
	if f.done.Type != history.OK {
		return fmt.Sprintf("ended %s: %s", f.done.Type, f.done.Error)
	}
	if f.hwm < 0 {
		return "no high watermark recorded"
	}
	start := f.done.Offset
	var missing []int64
	for o := start; o < f.hwm; o++ {
		if _, ok := f.byOffset[o]; !ok {
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%d offsets in [%d, %d) not returned, first %d", len(missing), start, f.hwm, missing[0])
	}
	return ""
}

func (a *analysis) compareFinals(out *collector, p int32, x, y *finalRead) {
	ops := []int64{x.done.Index, y.done.Index}
	if x.hwm != y.hwm {
		out.add(Anomaly{Kind: FinalReadDivergence, Partition: p, Offset: -1, Ops: ops,
			Detail: fmt.Sprintf("high watermark %d via %s, %d via %s", x.hwm, x.via, y.hwm, y.via)})
		return
	}
	if x.done.Offset != y.done.Offset {
		out.add(Anomaly{Kind: FinalReadDivergence, Partition: p, Offset: -1, Ops: ops,
			Detail: fmt.Sprintf("log start %d via %s, %d via %s", x.done.Offset, x.via, y.done.Offset, y.via)})
	}
}

// checkInconsistentOffsets reports every position claimed by two values.
func (a *analysis) checkInconsistentOffsets(out *collector) {
	for _, p := range sortedPositions(a.seen) {
		m := a.seen[p]
		if len(m) < 2 {
			continue
		}
		an := Anomaly{Kind: InconsistentOffsets, Partition: p.p, Offset: p.o}
		for _, v := range sortedKeys(m) {
			an.Values = append(an.Values, v)
			an.Ops = append(an.Ops, m[v])
		}
		an.Detail = fmt.Sprintf("partition %d offset %d holds %d values: %v", p.p, p.o, len(m), an.Values)
		out.add(an)
	}
}

// checkSends finds lost writes, wrong acknowledged offsets and G1a, and
// values consumers saw that the final read lost.
func (a *analysis) checkSends(out *collector) {
	lost := map[string]bool{}
	for _, s := range a.sendOrder {
		v := s.inv.Value
		switch s.outcome {
		case history.OK:
			if !a.finalized(s.ack.p) {
				continue // reported as an incomplete final read
			}
			at := a.finalAt[v]
			if len(at) == 0 {
				lost[v] = true
				out.add(Anomaly{Kind: LostWrite, Partition: s.ack.p, Offset: s.ack.o, Values: []string{v},
					Ops:    []int64{s.inv.Index, s.done.Index},
					Detail: fmt.Sprintf("%q acknowledged at %d/%d is missing from the final read", v, s.ack.p, s.ack.o)})
				continue
			}
			if _, ok := at[s.ack]; (!ok && s.ack.o >= 0) || s.ack.p != s.inv.Partition {
				got := sortedPositionsOf(at)
				out.add(Anomaly{Kind: WrongOffset, Partition: s.ack.p, Offset: s.ack.o, Values: []string{v},
					Ops: []int64{s.inv.Index, s.done.Index, at[got[0]]},
					Detail: fmt.Sprintf("%q sent to partition %d, acknowledged at %d/%d, final read has it at %v",
						v, s.inv.Partition, s.ack.p, s.ack.o, fmtPositions(got))})
			}
		case history.Fail:
			if at := a.readAt[v]; len(at) > 0 {
				got := sortedPositionsOf(at)
				out.add(Anomaly{Kind: G1a, Partition: got[0].p, Offset: got[0].o, Values: []string{v},
					Ops:    []int64{s.inv.Index, s.done.Index, at[got[0]]},
					Detail: fmt.Sprintf("%q failed definitely (%s) yet was read at %v", v, s.done.Error, fmtPositions(got))})
			}
		default:
			if len(a.readAt[v]) > 0 {
				a.stats.InfoVisible++
			}
		}
	}
	for _, v := range sortedKeys(a.polledAt) {
		if lost[v] || len(a.finalAt[v]) > 0 {
			continue
		}
		got := sortedPositionsOf(a.polledAt[v])
		if !a.finalized(got[0].p) {
			continue
		}
		out.add(Anomaly{Kind: LostWrite, Partition: got[0].p, Offset: got[0].o, Values: []string{v},
			Ops:    []int64{a.polledAt[v][got[0]]},
			Detail: fmt.Sprintf("%q was polled at %v (committed) but is missing from the final read", v, fmtPositions(got))})
	}
}

// checkDuplicates reports values read at more than one position, unless the
// producer was not idempotent and the send's outcome was unknown.
func (a *analysis) checkDuplicates(out *collector) {
	for _, v := range sortedKeys(a.readAt) {
		at := a.readAt[v]
		if len(at) < 2 {
			continue
		}
		s := a.sends[v]
		if s == nil {
			continue // a phantom; reported by checkPhantoms
		}
		if !s.inv.Idempotent && s.outcome == history.Info {
			a.stats.AllowedDuplicate++
			continue
		}
		got := sortedPositionsOf(at)
		ops := []int64{s.inv.Index}
		if s.done != nil {
			ops = append(ops, s.done.Index)
		}
		for _, p := range got {
			ops = append(ops, at[p])
		}
		mode := "plain"
		if s.inv.Idempotent {
			mode = "idempotent"
		}
		out.add(Anomaly{Kind: Duplicate, Partition: got[0].p, Offset: got[0].o, Values: []string{v}, Ops: ops,
			Detail: fmt.Sprintf("%q (%s producer, send %s) read at %d positions: %v", v, mode, s.outcome, len(got), fmtPositions(got))})
	}
}

func (a *analysis) checkPhantoms(out *collector) {
	for _, v := range sortedKeys(a.readAt) {
		if a.sends[v] != nil {
			continue
		}
		got := sortedPositionsOf(a.readAt[v])
		out.add(Anomaly{Kind: Phantom, Partition: got[0].p, Offset: got[0].o, Values: []string{v},
			Ops:    []int64{a.readAt[v][got[0]]},
			Detail: fmt.Sprintf("%q read at %v was never sent", v, fmtPositions(got))})
	}
}

// checkProducerOrder: within one producer and partition, acknowledged offsets
// must grow in the order the producer issued its sends.
func (a *analysis) checkProducerOrder(out *collector) {
	type key struct {
		process string
		p       int32
	}
	groups := map[key][]*send{}
	var keys []key
	for _, s := range a.sendOrder {
		if s.outcome != history.OK || s.ack.o < 0 {
			continue
		}
		k := key{s.inv.Process, s.ack.p}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	for _, k := range keys {
		g := groups[k]
		sort.SliceStable(g, func(i, j int) bool { return g[i].inv.Seq < g[j].inv.Seq })
		for i := 1; i < len(g); i++ {
			x, y := g[i-1], g[i]
			if x.ack.o > y.ack.o {
				out.add(Anomaly{Kind: ProducerOrder, Partition: k.p, Offset: y.ack.o,
					Values: []string{x.inv.Value, y.inv.Value},
					Ops:    []int64{x.inv.Index, x.done.Index, y.inv.Index, y.done.Index},
					Detail: fmt.Sprintf("%s sent %q (seq %d) before %q (seq %d) but they were acknowledged at offsets %d > %d",
						k.process, x.inv.Value, x.inv.Seq, y.inv.Value, y.inv.Seq, x.ack.o, y.ack.o)})
			}
		}
	}
}

// checkRealtimeOrder: if A was acknowledged before B was invoked, both in one
// partition, A's offset must be lower than B's.
func (a *analysis) checkRealtimeOrder(out *collector) {
	byP := map[int32][]*send{}
	for _, s := range a.sendOrder {
		if s.outcome == history.OK && s.ack.o >= 0 {
			byP[s.ack.p] = append(byP[s.ack.p], s)
		}
	}
	for _, p := range sortedPartitions(byP) {
		invoked := append([]*send(nil), byP[p]...)
		sort.SliceStable(invoked, func(i, j int) bool { return invoked[i].inv.Time < invoked[j].inv.Time })
		acked := append([]*send(nil), byP[p]...)
		sort.SliceStable(acked, func(i, j int) bool { return acked[i].done.Time < acked[j].done.Time })
		var top *send // highest offset among sends acknowledged so far
		j := 0
		for _, b := range invoked {
			for j < len(acked) && acked[j].done.Time < b.inv.Time {
				if top == nil || acked[j].ack.o > top.ack.o {
					top = acked[j]
				}
				j++
			}
			if top != nil && top.ack.o > b.ack.o {
				out.add(Anomaly{Kind: RealtimeOrder, Partition: p, Offset: b.ack.o,
					Values: []string{top.inv.Value, b.inv.Value},
					Ops:    []int64{top.done.Index, b.inv.Index, b.done.Index},
					Detail: fmt.Sprintf("%q was acknowledged at offset %d before %q was sent, which got offset %d",
						top.inv.Value, top.ack.o, b.inv.Value, b.ack.o)})
			}
		}
	}
}

// checkHWM: each observer's high watermarks never go down.
func (a *analysis) checkHWM(out *collector) {
	type key struct {
		process string
		p       int32
	}
	type seen struct {
		hwm int64
		op  int64
	}
	top := map[key]seen{}
	polls := append([]history.Pair(nil), a.polls...)
	sort.SliceStable(polls, func(i, j int) bool { return completeIndex(polls[i]) < completeIndex(polls[j]) })
	for _, pr := range polls {
		if pr.Complete == nil {
			continue
		}
		for _, w := range pr.Complete.Watermarks {
			if w.HWM < 0 {
				continue // the fetch carried an error for this partition
			}
			k := key{pr.Invoke.Process, w.Partition}
			prev, ok := top[k]
			if ok && w.HWM < prev.hwm {
				out.add(Anomaly{Kind: HWMDecrease, Partition: w.Partition, Offset: w.HWM,
					Ops: []int64{prev.op, pr.Complete.Index},
					Detail: fmt.Sprintf("%s saw partition %d's high watermark go from %d down to %d",
						k.process, w.Partition, prev.hwm, w.HWM)})
				continue
			}
			if !ok || w.HWM > prev.hwm {
				top[k] = seen{w.HWM, pr.Complete.Index}
			}
		}
	}
}

func completeIndex(p history.Pair) int64 {
	if p.Complete == nil {
		return p.Invoke.Index
	}
	return p.Complete.Index
}

func sortedPositions[V any](m map[pos]V) []pos {
	out := make([]pos, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sortPos(out)
	return out
}

func sortedPositionsOf(m map[pos]int64) []pos { return sortedPositions(m) }

func sortPos(ps []pos) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].p != ps[j].p {
			return ps[i].p < ps[j].p
		}
		return ps[i].o < ps[j].o
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func fmtPositions(ps []pos) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d/%d", p.p, p.o)
	}
	return "[" + s + "]"
}
