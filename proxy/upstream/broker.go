package upstream

// One broker's connections: the pool's choice among its shared,
// on-demand and dedicated ones, and the redial backoff of the shared ones.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Broker shapes, learned from a connection's ApiVersions handshake.
const (
	shapeUnknown uint32 = iota
	shapeInOrder
	shapeUnordered
)

// brokerPool is one broker's fixed set of shared connections, its
// on-demand connections (serial.go) and its dedicated ones (lanes.go).
type brokerPool struct {
	p      *Pool
	id     int32
	addr   string
	m      *brokerMetrics
	ctx    context.Context
	cancel context.CancelFunc
	shared []sharedConn
	closed atomic.Bool
	// shape is what the latest handshake said: whether the broker answers
	// in order. Only the choice of connection depends on it; every
	// connection handles either shape correctly.
	shape  atomic.Uint32
	serial serialConns
	lanes  lanes
}

func newBrokerPool(p *Pool, id int32, addr string) *brokerPool {
	ctx, cancel := context.WithCancel(p.ctx)
	bp := &brokerPool{p: p, id: id, addr: addr, m: p.m.forBroker(id), ctx: ctx, cancel: cancel,
		shared: make([]sharedConn, p.cfg.ConnsPerBroker)}
	bp.lanes.init(p.cfg.MaxBlockingConnsPerBroker)
	bp.serial.init(bp, p.cfg.MaxConnsPerBroker)
	return bp
}

func (bp *brokerPool) conn(affinity uint64) (*conn, error) {
	return bp.shared[affinity%uint64(len(bp.shared))].get(bp)
}

// connFor returns the connection for a request of affinity: the shared one
// if the broker answers out of order; else the affinity's dedicated one if
// the request may be held long (holds), or an on-demand one. Until a
// handshake told the broker's shape, it waits for the first connection's.
func (bp *brokerPool) connFor(ctx context.Context, affinity uint64, holds bool) (*conn, error) {
	shape := bp.shape.Load()
	if shape == shapeUnknown {
		c, err := bp.conn(0)
		if err != nil {
			return nil, err
		}
		if err := c.handshaken(ctx); err != nil {
			return nil, err
		}
		shape = bp.shape.Load()
	}
	switch {
	case shape == shapeUnordered:
		return bp.conn(affinity)
	case holds:
		return bp.dedicated(ctx, affinity)
	default:
		return bp.serial.get(ctx, affinity)
	}
}

// close fails every connection without waiting; Pool.Close waits.
func (bp *brokerPool) close(cause error) {
	bp.closed.Store(true)
	bp.cancel()
	for i := range bp.shared {
		bp.shared[i].close(cause)
	}
	bp.closeLanes(cause)
	bp.serial.close(cause)
}

// sharedConn holds one of a broker pool's shared connections and the redial
// backoff after consecutive dial failures.
type sharedConn struct {
	cur    atomic.Pointer[conn]
	mu     sync.Mutex
	redial redial
}

func (s *sharedConn) get(bp *brokerPool) (*conn, error) {
	if c := s.cur.Load(); c != nil && !c.dying.Load() {
		return c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur.Load(); c != nil && !c.dying.Load() {
		return c, nil
	}
	if bp.closed.Load() {
		return nil, errEvicted
	}
	if err := s.redial.check(bp.p.now()); err != nil {
		return nil, err
	}
	c := newConn(bp, s, 0)
	s.cur.Store(c)
	c.start()
	return c, nil
}

// onDead marks c dying and makes room for a new connection. A
// connection that never completed its handshake counts as a dial failure and
// extends the backoff. c.fail calls it with c.mu held.
func (s *sharedConn) onDead(c *conn, connected bool, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.dying.Store(true)
	s.cur.CompareAndSwap(c, nil)
	s.redial.record(&c.bp.p.cfg, c.bp.p.now(), connected, cause)
}

// released implements connOwner: a shared connection has nothing to do.
func (s *sharedConn) released(*conn, bool) {}

// redial is the backoff before dialing a broker again after consecutive
// dial failures; its owner's mutex guards it.
type redial struct {
	failures int
	retryAt  time.Time
	lastErr  error
}

// check fails while the backoff lasts.
func (r *redial) check(now time.Time) error {
	if wait := r.retryAt.Sub(now); wait > 0 {
		return fmt.Errorf("redial in %s after %d failures: %w", wait.Round(time.Millisecond), r.failures, r.lastErr)
	}
	return nil
}

// record learns of a connection's death: one that never completed its
// handshake counts as a dial failure and extends the backoff.
func (r *redial) record(cfg *Config, now time.Time, connected bool, cause error) {
	if connected {
		*r = redial{}
		return
	}
	if errors.Is(cause, errEvicted) || errors.Is(cause, errPoolClosed) {
		return
	}
	r.failures++
	r.lastErr = cause
	backoff := cfg.BackoffMin << min(r.failures-1, 20)
	if backoff > cfg.BackoffMax || backoff <= 0 {
		backoff = cfg.BackoffMax
	}
	r.retryAt = now.Add(backoff)
}

func (s *sharedConn) close(cause error) {
	s.mu.Lock()
	c := s.cur.Load()
	s.mu.Unlock() // c.fail takes c.mu, then s.mu: never hold s.mu into it
	if c != nil {
		c.fail(kindClosed, cause)
	}
}
