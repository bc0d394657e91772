package lease

import (
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// lossQueue holds reported losses until the holder takes them. It never
// drops one and never blocks the reporter: every ownership is lost at most
// once (drop and expire remove it from the owned map under the session
// lock), so the queue holds at most what the session held since the last
// take, and a session expiry is one entry however many resources it covers.
type lossQueue struct {
	mu      sync.Mutex
	pending []Loss
	closed  bool
	ready   chan struct{} // capacity 1: a token means "take"; closed by close

	sessionLosses  atomic.Int64
	ownershipsLost atomic.Int64
}

func newLossQueue() *lossQueue { return &lossQueue{ready: make(chan struct{}, 1)} }

func (q *lossQueue) add(l Loss) {
	if len(l.Resources) == 0 {
		return
	}
	q.ownershipsLost.Add(int64(len(l.Resources)))
	if l.Session {
		q.sessionLosses.Add(1)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.pending = append(q.pending, l)
	select {
	case q.ready <- struct{}{}:
	default: // a token is already waiting; take drains everything
	}
}

func (q *lossQueue) take() []Loss {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}

func (q *lossQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		q.pending = nil
		close(q.ready)
	}
}

// Stats are the session's counters since NewSession.
type Stats struct {
	SessionLosses  int64 // lease expiries that cost the session what it held
	OwnershipsLost int64 // resources reported lost (expiries and fenced commits)
	Txns           int64 // batched etcd transactions sent (acquire and commit)
	TxnItems       int64 // acquisitions and commits those transactions carried
	Overloads      int64 // etcd answers treated as back-pressure and retried
}

func newOwnership(r Resource, id clientv3.LeaseID) *Ownership {
	return &Ownership{Resource: r, lease: id, lost: make(chan struct{})}
}

// Lost is closed once the session no longer holds o: lost, released, or
// the session closed.
func (o *Ownership) Lost() <-chan struct{} { return o.lost }

func (o *Ownership) markLost() { o.lostOnce.Do(func() { close(o.lost) }) }
