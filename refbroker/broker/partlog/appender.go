package partlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// request is one queued append or trim.
type request struct {
	batches []Batch
	bytes   int
	trim    bool
	trimTo  int64
	done    chan Result
}

func (r *request) finish(res Result) { r.done <- res }

// appender serializes everything written to one partition. It owns the
// partition's ownership and the state that ownership read; the state is
// dropped with the appender.
type appender struct {
	logs *Logs
	cfg  *Config
	tp   TP
	res  lease.Resource

	mu       sync.Mutex
	queue    []*request
	closed   bool
	stopping error
	wake     chan struct{}

	owned atomic.Pointer[lease.Ownership] // for Drop's staleness check

	// Touched only by the run goroutine.
	own      *lease.Ownership
	state    schema.PartitionState // as of stateRev, producers included
	stateRev int64
	migrate  bool // state read in the old encoding: next commit moves producers to keys
}

func newAppender(l *Logs, tp TP) *appender {
	return &appender{
		logs: l,
		cfg:  &l.cfg,
		tp:   tp,
		res:  lease.PartitionResource(l.cfg.Layout, tp.Topic, tp.Partition, schema.New(l.cfg.Layout).PartitionStateKey(tp.Topic, tp.Partition)),
		wake: make(chan struct{}, 1),
	}
}

// enqueue adds r unless the appender has closed.
func (a *appender) enqueue(r *request) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.queue = append(a.queue, r)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return true
}

func (a *appender) stop(reason error) {
	a.mu.Lock()
	if a.stopping == nil {
		a.stopping = reason
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// next waits for work and takes one group: produces up to MaxGroupBytes, or
// a single trim. ok is false when the appender must stop.
func (a *appender) next() ([]*request, bool) {
	for {
		a.mu.Lock()
		if a.stopping != nil {
			a.mu.Unlock()
			return nil, false
		}
		if len(a.queue) > 0 {
			n, size := 0, 0
			for n < len(a.queue) {
				r := a.queue[n]
				if r.trim {
					if n == 0 {
						n = 1
					}
					break
				}
				if n > 0 && size+r.bytes > a.cfg.MaxGroupBytes {
					break
				}
				size += r.bytes
				n++
			}
			group := slices.Clone(a.queue[:n])
			clear(a.queue[:n]) // the backing array must not pin request frames
			a.queue = a.queue[n:]
			if len(a.queue) == 0 {
				a.queue = nil
			}
			a.mu.Unlock()
			return group, true
		}
		a.mu.Unlock()
		select {
		case <-a.wake:
		case <-a.logs.ctx.Done():
			return nil, false
		}
	}
}

func (a *appender) run() {
	log := a.cfg.Logger.With("partition", a.res.Name)
	defer a.exit()
	for {
		group, ok := a.next()
		if !ok {
			return
		}
		if res, dead := a.ensureOwned(); res.Code != 0 {
			log.Info("cannot write partition", "code", res.Code, "why", res.Msg)
			if dead {
				// Closed before the answers go out: a request sent after
				// one of them starts a new appender instead of being
				// failed by this one on its way out.
				a.exitWith(res)
			}
			failAll(group, res)
			if dead {
				return
			}
			continue
		}
		var dead bool
		if group[0].trim {
			dead = a.trim(group[0])
		} else {
			dead = a.append(group)
		}
		if dead {
			return
		}
	}
}

// exit closes the appender, fails what is still queued and forgets it.
// Calling it again does nothing more.
func (a *appender) exit() {
	a.exitWith(Result{Code: kerr.NotLeaderForPartition.Code, Msg: "partition no longer owned by this broker"})
}

// exitWith is exit failing the queue with res (unless the appender was
// stopped: then with the reason it was stopped for).
func (a *appender) exitWith(res Result) {
	a.mu.Lock()
	a.closed = true
	q := a.queue
	a.queue = nil
	if a.stopping != nil {
		res = Result{Code: kerr.NotLeaderForPartition.Code, Msg: a.stopping.Error()}
	}
	a.mu.Unlock()
	failAll(q, res)
	a.logs.remove(a)
}

func failAll(rs []*request, res Result) {
	for _, r := range rs {
		r.finish(res)
	}
}

// ensureOwned makes sure the appender holds the partition with a state it
// can trust. dead means the appender must exit.
func (a *appender) ensureOwned() (res Result, dead bool) {
	if a.own != nil {
		if a.cfg.DisableFencing {
			return Result{}, false // the broken mode trusts its cached ownership
		}
		if o, ok := a.cfg.Session.Owns(a.res); ok && o == a.own && o.StateRev == a.stateRev {
			return Result{}, false
		}
	}
	if !a.cfg.Pacer.Take(a.logs.ctx, pacer.Partition) {
		// etcd already has all the acquisitions it can take: answer now,
		// the client retries after refreshing metadata.
		return Result{Code: kerr.NotLeaderForPartition.Code, Msg: "partition not acquired yet: broker busy acquiring others; retry"}, true
	}
	defer a.cfg.Pacer.Release()
	ctx, cancel := context.WithTimeout(a.logs.ctx, a.cfg.AcquireTimeout)
	defer cancel()
	o, err := a.cfg.Session.Acquire(ctx, a.res)
	if err != nil {
		a.own = nil
		a.owned.Store(nil)
		return acquireFailure(err), true
	}
	if o != a.own || o.StateRev != a.stateRev {
		var st schema.PartitionState
		if len(o.State) > 0 {
			if err := layout.Unmarshal(o.State, &st); err != nil {
				return Result{Code: kerr.KafkaStorageError.Code, Msg: fmt.Sprintf("partition state: %v", err)}, true
			}
		}
		if err := a.loadProducers(ctx, &st); err != nil {
			a.own = nil
			a.owned.Store(nil)
			return Result{Code: kerr.NotLeaderForPartition.Code, Msg: err.Error()}, true
		}
		if o != a.own {
			a.cfg.Obs.Acquired(a.tp)
		}
		a.own, a.state, a.stateRev = o, st, o.StateRev
		a.cfg.View.RaiseFloor(a.tp, st.End, o.StateRev)
		a.owned.Store(o)
	}
	return Result{}, false
}

// acquireFailure answers appends that found the partition not held. Nothing
// of theirs was written whatever the acquisition did, so the answer is the
// definite, retriable NOT_LEADER_OR_FOLLOWER (never REQUEST_TIMED_OUT, which
// leaves idempotent producers unsure of a write that never happened).
func acquireFailure(err error) Result {
	var oe lease.OwnedElsewhereError
	if errors.As(err, &oe) {
		return Result{Code: kerr.NotLeaderForPartition.Code, Msg: fmt.Sprintf("partition owned by broker %d", oe.Broker)}
	}
	return Result{Code: kerr.NotLeaderForPartition.Code, Msg: "partition not acquired: " + err.Error()}
}

// commitFailure maps a commit error to the answer for the group, and says
// whether the appender must exit.
func commitFailure(err error) (Result, bool) {
	switch {
	case errors.Is(err, lease.ErrAmbiguous):
		return Result{Code: kerr.RequestTimedOut.Code, Msg: err.Error()}, false
	case errors.Is(err, lease.ErrFenced), errors.Is(err, lease.ErrNotOwner),
		errors.Is(err, lease.ErrNeedsReread), errors.Is(err, lease.ErrClosed):
		return Result{Code: kerr.NotLeaderForPartition.Code, Msg: err.Error()}, true
	case errors.Is(err, lease.ErrOverloaded), errors.Is(err, lease.ErrNotSent):
		// Definitely not written and the partition is still ours: a
		// retriable refusal that does not leave the producer unsure.
		return Result{Code: kerr.NotEnoughReplicas.Code, Msg: err.Error()}, false
	}
	return Result{Code: kerr.KafkaStorageError.Code, Msg: err.Error()}, false
}
