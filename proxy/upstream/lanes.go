package upstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

var (
	errIdle          = errors.New("dedicated connection closed when idle")
	errLaneReclaimed = errors.New("idle dedicated connection closed to make room")
)

// lanes are a broker pool's dedicated connections, one per affinity, each
// holding one of max tokens while it lives. They carry the requests whose
// Hold is Long to brokers that answer in order; which requests those are
// is the caller's knowledge (apis.holdOf), not this package's.
type lanes struct {
	mu     sync.Mutex
	byAff  map[uint64]*conn
	tokens chan struct{}
	// freed is closed (and replaced) whenever a dedicated connection dies
	// or becomes idle, waking every Send waiting for room.
	freed chan struct{}
}

func (l *lanes) init(max int) {
	l.byAff = make(map[uint64]*conn)
	l.tokens = make(chan struct{}, max)
	l.freed = make(chan struct{})
}

func (l *lanes) wakeLocked() {
	close(l.freed)
	l.freed = make(chan struct{})
}

// laneOwner is the owner of affinity's dedicated connection.
type laneOwner struct {
	bp  *brokerPool
	aff uint64
}

func (o laneOwner) onDead(c *conn, _ bool, _ error) {
	c.dying.Store(true)
	l := &o.bp.lanes
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAff[o.aff] == c {
		delete(l.byAff, o.aff)
	}
	<-l.tokens
	o.bp.m.dedicated.Dec()
	l.wakeLocked()
}

// released wakes Sends waiting for room once c is idle: it may now be
// reclaimed. Called with the connection's mutex held.
func (o laneOwner) released(c *conn, _ bool) {
	if len(c.inflight) > 0 {
		return
	}
	l := &o.bp.lanes
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// dedicated returns affinity's dedicated connection, dialing one if needed.
// At the bound it closes another affinity's idle one, or waits for room
// until ctx ends. Lock order: a conn's mutex before lanes.mu, never after.
func (bp *brokerPool) dedicated(ctx context.Context, aff uint64) (*conn, error) {
	l := &bp.lanes
	for {
		l.mu.Lock()
		if bp.closed.Load() {
			l.mu.Unlock()
			return nil, errEvicted
		}
		if c := l.byAff[aff]; c != nil && !c.dying.Load() {
			l.mu.Unlock()
			return c, nil
		}
		select {
		case l.tokens <- struct{}{}:
			c := newConn(bp, laneOwner{bp, aff}, bp.p.cfg.BlockingConnIdle)
			l.byAff[aff] = c
			bp.m.dedicated.Inc()
			c.start() // under l.mu, so that closeLanes sees every started conn
			l.mu.Unlock()
			return c, nil
		default:
		}
		var victim *conn
		for _, c := range l.byAff {
			if len(c.sem) == 0 && !c.dying.Load() {
				victim = c
				break
			}
		}
		freed := l.freed
		l.mu.Unlock()
		if victim != nil && victim.closeIfIdle(errLaneReclaimed) {
			continue
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for one of %d dedicated connections: %w", cap(l.tokens), context.Cause(ctx))
		case <-bp.ctx.Done():
			return nil, errEvicted
		}
	}
}

// closeLanes fails every dedicated connection; bp.closed is already set, so
// no new one starts.
func (bp *brokerPool) closeLanes(cause error) {
	l := &bp.lanes
	l.mu.Lock()
	conns := slices.Collect(maps.Values(l.byAff))
	l.mu.Unlock()
	for _, c := range conns {
		c.fail(kindClosed, cause)
	}
}
