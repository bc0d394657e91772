package partlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// maxEpochs bounds the epoch history kept in the partition state; older
// epochs are forgotten (OffsetForLeaderEpoch then answers for the oldest
// kept one).
const maxEpochs = 256

// pending is a request of the group being built and its answer if the
// commit succeeds.
type pending struct {
	req     *request
	res     Result
	decided bool // res is final whatever the commit does (errors, old duplicates)
}

// built is a group commit ready to write: the state after it, the segment
// bytes and every request's answer if the commit succeeds.
type built struct {
	state   schema.PartitionState
	base    int64
	buf     []byte
	maxTS   int64
	pending []pending
	put     []int64 // producers whose keys the commit writes
	del     []int64 // producers whose keys the commit deletes
}

// build assigns offsets to the group's batches in queue order, on top of the
// state this appender last read or committed, and copies them into one
// segment with their base offsets rewritten.
func (a *appender) build(group []*request) built {
	now := a.cfg.Now()
	st := a.state
	st.Epochs = slices.Clip(st.Epochs) // appends must not write into a.state's array
	prod := producerTable{src: st.Producers}
	size := 0
	for _, r := range group {
		size += r.bytes
	}
	g := built{base: st.End, buf: make([]byte, 0, size), maxTS: -1, pending: make([]pending, len(group))}
	for i, r := range group {
		p := &g.pending[i]
		p.req = r
		res, ok := prod.check(r.batches)
		if !ok {
			// Errors and duplicates of committed batches are final; a
			// duplicate of a batch in this group shares its fate.
			p.res, p.decided = res, res.Code != 0 || res.BaseOffset < g.base
			continue
		}
		p.res = Result{BaseOffset: st.End}
		for _, b := range r.batches {
			start := len(g.buf)
			g.buf = append(g.buf, b.Raw...)
			setBaseOffset(g.buf[start:], st.End)
			prod.record(&b, st.End, now.UnixMilli())
			st.End += int64(b.LastOffsetDelta) + 1
			g.maxTS = max(g.maxTS, b.MaxTimestamp)
		}
	}
	st.Producers = prod.result(now)
	g.put, g.del = prod.changes(st.Producers)
	g.state = st
	return g
}

// append writes one segment for the group and commits it. It returns true
// when the appender must exit.
func (a *appender) append(group []*request) bool {
	g := a.build(group)
	st := g.state
	if st.End == g.base {
		a.answer(g.pending, nil, st.LogStart)
		return false
	}
	if n := len(st.Epochs); n == 0 || st.Epochs[n-1].Epoch != a.own.Epoch {
		st.Epochs = append(st.Epochs, schema.EpochStart{Epoch: a.own.Epoch, Start: g.base})
		if len(st.Epochs) > maxEpochs {
			st.Epochs = st.Epochs[len(st.Epochs)-maxEpochs:]
		}
	}
	seg := schema.Segment{
		Object: a.objectName(g.base), Base: g.base, Last: st.End - 1,
		Bytes: int64(len(g.buf)), Epoch: a.own.Epoch, MaxTimestamp: g.maxTS,
	}
	if err := a.putObject(seg.Object, g.buf); err != nil {
		a.answer(g.pending, &Result{Code: kerr.KafkaStorageError.Code, Msg: err.Error()}, st.LogStart)
		return false
	}
	ops := []clientv3.Op{clientv3.OpPut(schema.New(a.cfg.Layout).SegmentKey(a.tp.Topic, a.tp.Partition, g.base), layout.Marshal(seg))}
	ops = append(ops, a.producerOps(st.Producers, g.put, g.del)...)
	fail, dead := a.commit(st, ops, &seg)
	a.answer(g.pending, fail, st.LogStart)
	return dead
}

// answer delivers results: the commit's outcome (fail nil = success) to
// every request whose answer depends on it.
func (a *appender) answer(ps []pending, fail *Result, logStart int64) {
	for _, p := range ps {
		switch {
		case p.decided:
			if p.res.Code == 0 {
				p.res.LogStart = logStart
			}
			p.req.finish(p.res)
		case fail != nil:
			p.req.finish(*fail)
		default:
			p.res.LogStart = logStart
			p.req.finish(p.res)
		}
	}
}

// trim advances the log start offset. It returns true when the appender
// must exit.
func (a *appender) trim(r *request) bool {
	st := a.state
	to := r.trimTo
	if to == -1 {
		to = st.End
	}
	switch {
	case to < 0 || to > st.End:
		r.finish(Result{Code: kerr.OffsetOutOfRange.Code, Msg: fmt.Sprintf("offset %d outside [0, %d]", to, st.End), LogStart: st.LogStart})
		return false
	case to <= st.LogStart:
		r.finish(Result{BaseOffset: st.LogStart, LogStart: st.LogStart})
		return false
	}
	st.LogStart = to
	var ops []clientv3.Op
	if snap, ok := a.cfg.View.Get(a.tp); ok {
		// Segment keys wholly below the new start go in the same commit. Only
		// a segment the view knows bounds the range; without one, keys stay
		// (the view hides them; they are harmless).
		if i := snap.Find(to); i >= 0 || to == st.End {
			keep := to
			if i >= 0 {
				keep = snap.Segments[i].Base
			}
			from := schema.New(a.cfg.Layout).SegmentKey(a.tp.Topic, a.tp.Partition, 0)
			end := schema.New(a.cfg.Layout).SegmentKey(a.tp.Topic, a.tp.Partition, keep)
			ops = append(ops, clientv3.OpDelete(from, clientv3.WithRange(end)))
		}
	}
	ops = append(ops, a.producerOps(st.Producers, nil, nil)...)
	fail, dead := a.commit(st, ops, nil)
	if fail != nil {
		r.finish(*fail)
	} else {
		r.finish(Result{BaseOffset: to, LogStart: to})
	}
	return dead
}

// commit writes st (plus ops) through the fence and publishes it to the
// view. It returns the failure to answer (nil on success) and whether the
// appender must exit.
func (a *appender) commit(st schema.PartitionState, ops []clientv3.Op, seg *schema.Segment) (*Result, bool) {
	if h := a.cfg.Hooks.BeforeCommit; h != nil {
		h(a.tp.Topic, a.tp.Partition)
	}
	enc := st // producers travel in their own keys (producerOps)
	enc.Producers, enc.ProducerKeys = nil, len(st.Producers)
	val := []byte(layout.Marshal(enc))
	ctx, cancel := context.WithTimeout(a.logs.ctx, a.cfg.OpTimeout)
	defer cancel()
	start := a.cfg.Now()
	var rev int64
	var err error
	if a.cfg.DisableFencing {
		rev, err = a.plainCommit(ctx, val, ops)
	} else {
		rev, err = a.cfg.Session.FencedCommit(ctx, a.own, val, ops...)
	}
	if err != nil {
		res, dead := commitFailure(err)
		a.cfg.Obs.CommitFailed(a.tp, errors.Is(err, lease.ErrFenced))
		a.cfg.Logger.Warn("commit failed", "partition", a.res.Name, "code", res.Code, "err", err)
		return &res, dead
	}
	a.cfg.Obs.Committed(a.tp, a.cfg.Now().Sub(start))
	a.state, a.stateRev, a.migrate = st, rev, false
	a.cfg.View.Apply(a.tp, st, rev, seg)
	if h := a.cfg.Hooks.AfterCommitBeforeAck; h != nil {
		h(a.tp.Topic, a.tp.Partition)
	}
	return nil, false
}

// plainCommit is the deliberately broken commit of DisableFencing: no
// compare at all, like systems that lose or duplicate writes under faults.
func (a *appender) plainCommit(ctx context.Context, val []byte, ops []clientv3.Op) (int64, error) {
	all := append([]clientv3.Op{clientv3.OpPut(a.res.StateKey, string(val))}, ops...)
	resp, err := a.cfg.Etcd.Txn(ctx).Then(all...).Commit()
	if err != nil {
		return 0, fmt.Errorf("unfenced commit %s: %w: %w", a.res.Name, lease.ErrAmbiguous, err)
	}
	a.own.State, a.own.StateRev = val, resp.Header.Revision
	return resp.Header.Revision, nil
}

func (a *appender) putObject(name string, data []byte) error {
	ctx, cancel := context.WithTimeout(a.logs.ctx, a.cfg.OpTimeout)
	defer cancel()
	if err := a.cfg.Store.PutIfAbsent(ctx, name, data); err != nil {
		return fmt.Errorf("write segment object %s: %w", name, err)
	}
	return nil
}

// objectName is unique per attempt: a retried or competing write can never
// overwrite an object a commit references.
func (a *appender) objectName(base int64) string {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("%s%020d-%d-%s", SegmentPrefix(a.tp), base, a.own.Epoch, hex.EncodeToString(r[:]))
}

// SegmentPrefix is the object-store prefix of a partition's segments.
func SegmentPrefix(tp TP) string {
	return fmt.Sprintf("segments/%s/%d/", tp.Topic, tp.Partition)
}

// producerOps writes the producer keys a commit changed: put for changed
// producers, delete for dropped ones. A state read in the old encoding (every
// producer inline) moves all of them to keys in its first commit.
func (a *appender) producerOps(final map[int64]schema.ProducerState, put, del []int64) []clientv3.Op {
	if a.migrate {
		put = slices.Sorted(maps.Keys(final))
	}
	sc := schema.New(a.cfg.Layout)
	ops := make([]clientv3.Op, 0, len(put)+len(del))
	for _, id := range put {
		ops = append(ops, clientv3.OpPut(sc.ProducerKey(a.tp.Topic, a.tp.Partition, id), layout.Marshal(final[id])))
	}
	for _, id := range del {
		ops = append(ops, clientv3.OpDelete(sc.ProducerKey(a.tp.Topic, a.tp.Partition, id)))
	}
	return ops
}

// loadProducers reads the producer keys of a state in the new encoding. Only
// fenced commits of the owner change them, and this appender now holds the
// partition, so any read after the acquisition sees the state it read.
func (a *appender) loadProducers(ctx context.Context, st *schema.PartitionState) error {
	if st.Producers != nil {
		a.migrate = true // old encoding: inline
		return nil
	}
	a.migrate = false
	if st.ProducerKeys == 0 {
		return nil
	}
	prefix := schema.New(a.cfg.Layout).ProducerPrefix(a.tp.Topic, a.tp.Partition)
	resp, err := a.cfg.Etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read producer state: %w", err)
	}
	st.Producers = make(map[int64]schema.ProducerState, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), prefix), 10, 64)
		if err != nil {
			return fmt.Errorf("producer key %s: %w", kv.Key, err)
		}
		var ps schema.ProducerState
		if err := layout.Unmarshal(kv.Value, &ps); err != nil {
			return fmt.Errorf("producer key %s: %w", kv.Key, err)
		}
		st.Producers[id] = ps
	}
	return nil
}
