package upstream

// The connections to a broker that answers in order (Apache Kafka,
// KafScale, kfake, the stub broker with --serial-requests): such a broker
// works on one request per connection at a time, so one connection shared
// by strangers makes each wait for the others. Here each client connection
// (affinity) with requests outstanding gets a connection of its own, as it
// would have talking to the broker directly: opened on demand, up to
// MaxConnsPerBroker, reused when idle (the most recently used first, whose
// buffers are warm), and closed by the pool's janitor after IdleTimeout
// without requests. An affinity's next request follows its previous one on
// the same connection while that one is outstanding (an acks=0 produce
// until confirmed, confirm.go), so one client's requests keep the order
// Send was called in (an idempotent producer's sequence numbers), and the
// broker never gets a client's requests in parallel that it would
// serialize anyway.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// serialConns are one broker pool's on-demand connections. Lock order: a
// conn's mutex before serialConns.mu, never after.
type serialConns struct {
	bp  *brokerPool
	max int

	mu     sync.Mutex
	all    map[*conn]struct{} // dialing, busy or idle; each holds a place
	idle   []idleConn         // a stack: the most recently idle on top
	byAff  map[uint64]*conn   // busy connections by the affinity they serve
	redial redial
	// freed is closed (and replaced) whenever a connection becomes idle or
	// dies while Sends wait at the limit (waiters), waking them all; with
	// nobody waiting it is left alone, which spares a channel per request.
	freed   chan struct{}
	waiters int
}

type idleConn struct {
	c     *conn
	since time.Time
}

func (s *serialConns) init(bp *brokerPool, max int) {
	s.bp, s.max = bp, max
	s.all = make(map[*conn]struct{})
	s.byAff = make(map[uint64]*conn)
	s.freed = make(chan struct{})
}

// get returns the connection for a request of aff: the one aff's earlier
// requests are still on, else an idle one, else a new one while under the
// limit. At the limit it waits, until ctx ends, for one to free up. The
// caller puts exactly one request on it, or calls released if it cannot.
func (s *serialConns) get(ctx context.Context, aff uint64) (*conn, error) {
	start := time.Now()
	defer func() { s.bp.m.connWait.Observe(time.Since(start).Seconds()) }()
	for {
		s.mu.Lock()
		c, err := s.takeLocked(aff)
		if c != nil || err != nil {
			s.mu.Unlock()
			return c, err
		}
		s.waiters++
		freed := s.freed
		s.mu.Unlock()
		err = s.await(ctx, freed)
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// await waits for freed to close, or for ctx or the broker pool to end.
func (s *serialConns) await(ctx context.Context, freed chan struct{}) error {
	select {
	case <-freed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for one of %d connections: %w", s.max, context.Cause(ctx))
	case <-s.bp.ctx.Done():
		return errEvicted
	}
}

// takeLocked assigns a connection to one more request of aff; nil, nil
// means the limit is reached.
func (s *serialConns) takeLocked(aff uint64) (*conn, error) {
	if s.bp.closed.Load() {
		return nil, errEvicted
	}
	if c := s.byAff[aff]; c != nil {
		c.load++
		return c, nil
	}
	var c *conn
	switch n := len(s.idle); {
	case n > 0:
		c = s.idle[n-1].c
		s.idle[n-1] = idleConn{}
		s.idle = s.idle[:n-1]
	case len(s.all) < s.max:
		if err := s.redial.check(s.bp.p.now()); err != nil {
			return nil, err
		}
		c = newConn(s.bp, s, 0)
		s.all[c] = struct{}{}
		c.start() // under s.mu, so that close sees every started conn
	default:
		return nil, nil
	}
	c.aff, c.load = aff, 1
	s.byAff[aff] = c
	s.gaugeLocked()
	return c, nil
}

// released implements connOwner: one request taken by get left c. The last
// one makes c idle, unless c failed.
func (s *serialConns) released(c *conn, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.load--
	if c.load > 0 {
		return
	}
	if s.byAff[c.aff] == c {
		delete(s.byAff, c.aff)
	}
	if !failed && !c.dying.Load() {
		s.idle = append(s.idle, idleConn{c, s.bp.p.now()})
	}
	s.wakeLocked()
}

// onDead implements connOwner.
func (s *serialConns) onDead(c *conn, connected bool, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.dying.Store(true)
	if _, ok := s.all[c]; !ok {
		return
	}
	delete(s.all, c)
	s.idle = slices.DeleteFunc(s.idle, func(ic idleConn) bool { return ic.c == c })
	if s.byAff[c.aff] == c {
		delete(s.byAff, c.aff)
	}
	s.redial.record(&s.bp.p.cfg, s.bp.p.now(), connected, cause)
	s.wakeLocked()
}

func (s *serialConns) wakeLocked() {
	if s.waiters > 0 {
		close(s.freed)
		s.freed = make(chan struct{})
	}
	s.gaugeLocked()
}

func (s *serialConns) gaugeLocked() {
	s.bp.m.serialIdle.Set(float64(len(s.idle)))
	s.bp.m.serialBusy.Set(float64(len(s.all) - len(s.idle)))
}

// sweep closes the connections idle since before now minus timeout.
func (s *serialConns) sweep(now time.Time, timeout time.Duration) {
	s.mu.Lock()
	// The stack's bottom holds the longest idle.
	n := 0
	for n < len(s.idle) && now.Sub(s.idle[n].since) >= timeout {
		n++
	}
	stale := make([]*conn, n)
	for i := range n {
		stale[i] = s.idle[i].c
	}
	s.idle = slices.Delete(s.idle, 0, n)
	s.mu.Unlock()
	// Off the stack, nobody takes them: they stay idle until closed.
	for _, c := range stale {
		c.closeIfIdle(errIdle)
	}
}

// close fails every connection; bp.closed is already set, so no new one
// starts.
func (s *serialConns) close(cause error) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.all))
	for c := range s.all {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.fail(kindClosed, cause)
	}
}

// janitor closes long-idle on-demand connections until the pool closes.
func (p *Pool) janitor() {
	defer p.wg.Done()
	t := time.NewTicker(max(p.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.sweepIdle()
		}
	}
}

// sweepIdle closes every broker's connections idle for IdleTimeout.
func (p *Pool) sweepIdle() {
	m := p.byID.Load()
	if m == nil {
		return
	}
	now := p.now()
	for _, bp := range *m {
		bp.serial.sweep(now, p.cfg.IdleTimeout)
	}
}
