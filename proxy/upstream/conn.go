package upstream

// One broker connection: its state, queueing a request on it (a correlation
// id, an in-flight token), withdrawing one, and failing the connection with
// every request on it. The writer is in write.go, the reader in read.go.

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/retry"
)

const (
	// maxResponseBytes bounds one response frame from a broker; anything
	// larger means the stream is corrupt.
	maxResponseBytes = 1 << 30
	// writeBatchBytes bounds one vectored write so that WriteTimeout stays
	// meaningful for a batch of large produce requests.
	writeBatchBytes = 1 << 20
	readBufferBytes = 32 << 10
	handshakeCorr   = 0
)

// conn is one multiplexed broker connection. Its writer goroutine dials,
// identifies the proxy with ApiVersions, then writes queued frames in enqueue
// order; its reader goroutine matches responses to requests by correlation id,
// in whatever order they come.
type conn struct {
	bp     *brokerPool
	owner  connOwner
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // one token per request in inflight
	wake   chan struct{} // cap 1: the queue is not empty
	dead   chan struct{} // closed by fail
	ready  chan struct{} // closed once the handshake is done
	dying  atomic.Bool
	// idle, when positive, closes the connection once it has had nothing
	// in flight that long (dedicated connections).
	idle time.Duration
	// unordered: the broker advertised layout.UnorderedResponsesFeature, so it may answer
	// in any order. Written before ready is closed; read after.
	unordered bool
	// hello is the broker's handshake answer (nil if it did not decode);
	// written before ready is closed, read after.
	hello *kmsg.ApiVersionsResponse
	// aff and load, for on-demand connections and guarded by their
	// serialConns' mutex: the affinity served and its requests on c.
	aff  uint64
	load int

	mu        sync.Mutex
	nc        net.Conn
	err       error // set once, by fail
	connected bool  // handshake done
	nextCorr  int32
	inflight  map[int32]*wireReq
	queue     []*wireReq
	// writing: a writer (the writer goroutine or a Send's writeInline)
	// holds the socket's write side; whoever set it alone uses wbufs and
	// wvec.
	writing      bool
	wbufs, wvec  net.Buffers
	written      deadlineHeap // written requests awaiting a response
	readDeadline time.Time
	lastDeadline time.Time // of the last written request
	idleSince    time.Time // when inflight last became empty
	// wseq numbers fully written requests in wire order; unconfirmed holds
	// those of acks=0 requests whose release waits for a later answer, and
	// barrierQueued tells that a barrier waits to be written (confirm.go).
	wseq          uint64
	unconfirmed   []uint64
	barrierQueued bool
}

// connOwner holds a connection and learns of its death. onDead is called
// once, with c.mu held, and must mark c dying. released is called with c.mu
// held whenever a request Send chose c for leaves it (answered, failed,
// withdrawn, or refused by enqueue); failed tells that c has failed.
type connOwner interface {
	onDead(c *conn, connected bool, cause error)
	released(c *conn, failed bool)
}

func newConn(bp *brokerPool, owner connOwner, idle time.Duration) *conn {
	ctx, cancel := context.WithCancel(bp.ctx)
	return &conn{
		bp: bp, owner: owner, ctx: ctx, cancel: cancel, idle: idle,
		sem:       make(chan struct{}, bp.p.cfg.MaxInFlightPerConn),
		wake:      make(chan struct{}, 1),
		dead:      make(chan struct{}),
		ready:     make(chan struct{}),
		inflight:  make(map[int32]*wireReq),
		idleSince: time.Now(),
	}
}

// handshaken waits for the connection's ApiVersions handshake.
func (c *conn) handshaken(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-c.dead:
		return c.notSent(c.failure())
	case <-ctx.Done():
		return c.notSent(fmt.Errorf("wait for handshake: %w", context.Cause(ctx)))
	}
}

func (c *conn) start() {
	c.bp.p.wg.Add(1)
	go c.writeLoop()
}

func (c *conn) notSent(cause error) error {
	return fmt.Errorf("broker %d (%s): %w: %w", c.bp.id, c.bp.addr, retry.ErrNotSent, cause)
}

// enqueue takes an in-flight token (waiting while the conn is full) and
// queues r behind every request enqueued before it.
func (c *conn) enqueue(ctx context.Context, r *wireReq) error {
	select {
	case c.sem <- struct{}{}:
	default:
		select {
		case c.sem <- struct{}{}:
		case <-ctx.Done():
			return c.notSent(fmt.Errorf("wait for room in flight: %w", context.Cause(ctx)))
		case <-c.dead:
			return c.notSent(c.failure())
		}
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return c.notSent(err)
	}
	r.c = c
	r.corr = c.allocCorrLocked()
	binary.BigEndian.PutUint32((*r.frame)[kwire.CorrOffset:], uint32(r.corr))
	c.inflight[r.corr] = r
	inline := c.connected && !c.writing && len(c.queue) == 0 && r.size <= inlineWriteBytes
	var nc net.Conn
	if inline {
		c.writing, r.state, nc = true, stWriting, c.nc
	} else {
		c.queue = append(c.queue, r)
	}
	c.mu.Unlock()
	c.bp.m.inflight.Inc()
	c.bp.m.requests.Inc()
	if inline {
		c.writeInline(nc, r)
	} else {
		c.signal()
	}
	return nil
}

// signal wakes the writer goroutine: the queue is not empty.
func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) allocCorrLocked() int32 {
	for {
		c.nextCorr++
		if c.nextCorr <= handshakeCorr { // wrapped
			c.nextCorr = handshakeCorr + 1
		}
		if _, used := c.inflight[c.nextCorr]; !used {
			return c.nextCorr
		}
	}
}

// removeLocked forgets r and tells its owner it left c.
func (c *conn) removeLocked(r *wireReq) {
	c.forgetLocked(r)
	if !r.barrier {
		c.owner.released(c, c.err != nil)
	}
}

// forgetLocked forgets r and returns its in-flight token.
func (c *conn) forgetLocked(r *wireReq) {
	delete(c.inflight, r.corr)
	if r.state == stWritten {
		heap.Remove(&c.written, r.hidx)
	}
	r.state = stDone
	if !r.barrier {
		<-c.sem
		c.bp.m.inflight.Dec()
	}
	if len(c.inflight) == 0 {
		c.idleSince = time.Now()
	}
}

// refused tells c's owner that a request chosen for c did not get on it.
func (c *conn) refused() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner.released(c, c.err != nil)
}

// armReadDeadlineLocked gives the connection until the earliest deadline of
// its written requests to answer; an idle connection has no deadline. A
// broker that misses a deadline is taken for hung: the connection fails.
func (c *conn) armReadDeadlineLocked() {
	var d time.Time
	if len(c.written) > 0 {
		d = c.written[0].deadline
	}
	if d != c.readDeadline && c.nc != nil {
		c.readDeadline = d
		_ = c.nc.SetReadDeadline(d) // fails only on a closed conn, which the reader sees
	}
}

// withdraw removes r if it is still queued, so that it is never written.
func (c *conn) withdraw(r *wireReq) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.state != stQueued || c.err != nil {
		return false
	}
	for i, q := range c.queue {
		if q == r {
			last := len(c.queue) - 1
			copy(c.queue[i:], c.queue[i+1:])
			c.queue[last] = nil
			c.queue = c.queue[:last]
			break
		}
	}
	c.removeLocked(r)
	// A request only partly written is queued again without its frame,
	// which the writer gave back (afterWrite), until its conn fails.
	if r.frame != nil {
		c.bp.p.bufs.Put(r.frame)
		r.frame = nil
	}
	r.giveBack()
	return true
}

// fail closes the connection and fails every request on it: queued ones (and
// ones only partly written) definitely did not reach the broker; written ones
// may have.
func (c *conn) fail(kind string, cause error) { c.failIf(kind, cause, false) }

// closeIfIdle closes the connection if nothing is queued or in flight on
// it, atomically with respect to enqueue: a request either is refused
// (ErrNotSent) or keeps the connection open.
func (c *conn) closeIfIdle(cause error) bool { return c.failIf(kindClosed, cause, true) }

func (c *conn) failIf(kind string, cause error, onlyIdle bool) bool {
	c.mu.Lock()
	if c.err != nil || (onlyIdle && len(c.inflight) > 0) {
		c.mu.Unlock()
		return false
	}
	c.err = cause
	reqs := make([]*wireReq, 0, len(c.inflight))
	errs := make([]error, 0, len(c.inflight))
	for _, r := range c.inflight {
		var err error
		if r.state == stQueued {
			err = c.notSent(cause)
			if r.frame != nil {
				c.bp.p.bufs.Put(r.frame)
				r.frame = nil
			}
			r.giveBack()
		} else {
			err = fmt.Errorf("broker %d (%s): connection lost after write: %w", c.bp.id, c.bp.addr, cause)
		}
		c.removeLocked(r)
		reqs, errs = append(reqs, r), append(errs, err)
	}
	clear(c.queue)
	c.queue = nil
	c.releaseUnconfirmedLocked(len(c.unconfirmed)) // whatever became of them, nothing will tell
	nc, connected := c.nc, c.connected
	// Under c.mu, so that wireReq.Wait and sharedConn.get never see a failed
	// connection that is not marked dying, nor a dying one whose failure
	// the sharedConn's backoff has not counted.
	c.owner.onDead(c, connected, cause)
	c.mu.Unlock()

	// Counted before dead closes: whoever sees the death (a Send waiting
	// for the handshake) sees it counted.
	if connected {
		c.bp.m.conns.Dec()
	}
	c.bp.m.fail(kind)
	close(c.dead)
	c.cancel()
	if nc != nil {
		nc.Close()
	}
	level := c.bp.p.log.Warn
	if kind == kindClosed {
		level = c.bp.p.log.Debug
	}
	level("broker connection closed", "broker", c.bp.id, "addr", c.bp.addr, "kind", kind, "failed_requests", len(reqs), "err", cause)
	for i, r := range reqs {
		r.complete(nil, errs[i])
	}
	return true
}
