package upstream

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
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

	mu           sync.Mutex
	nc           net.Conn
	err          error // set once, by fail
	connected    bool  // handshake done
	nextCorr     int32
	inflight     map[int32]*wireReq
	queue        []*wireReq
	written      deadlineHeap // written requests awaiting a response
	readDeadline time.Time
	lastDeadline time.Time // of the last written request
	idleSince    time.Time // when inflight last became empty
}

// connOwner holds a connection and learns of its death. onDead is called
// once, with c.mu held, and must mark c dying.
type connOwner interface {
	onDead(c *conn, connected bool, cause error)
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

// answersInOrder waits for the handshake and reports whether the broker
// answers this connection one request at a time, in order (it did not
// advertise layout.UnorderedResponsesFeature).
func (c *conn) answersInOrder(ctx context.Context) (bool, error) {
	if err := c.handshaken(ctx); err != nil {
		return false, err
	}
	return !c.unordered, nil
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
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	c.bp.m.inflight.Inc()
	c.bp.m.requests.Inc()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
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

// removeLocked forgets r and returns its in-flight token.
func (c *conn) removeLocked(r *wireReq) {
	delete(c.inflight, r.corr)
	if r.state == stWritten {
		heap.Remove(&c.written, r.hidx)
	}
	r.state = stDone
	<-c.sem
	c.bp.m.inflight.Dec()
	if len(c.inflight) == 0 {
		c.idleSince = time.Now()
		if c.idle > 0 {
			c.bp.laneIdle()
		}
	}
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
	c.bp.p.bufs.Put(r.frame)
	r.frame = nil
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
	nc, connected := c.nc, c.connected
	// Under c.mu, so that wireReq.Wait and sharedConn.get never see a failed
	// connection that is not marked dying, nor a dying one whose failure
	// the sharedConn's backoff has not counted.
	c.owner.onDead(c, connected, cause)
	c.mu.Unlock()

	close(c.dead)
	c.cancel()
	if nc != nil {
		nc.Close()
	}
	if connected {
		c.bp.m.conns.Dec()
	}
	c.bp.m.fail(kind)
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

// writeLoop owns the connection's life: dial, handshake, then write batches
// until the connection fails or is closed.
func (c *conn) writeLoop() {
	defer c.bp.p.wg.Done()
	nc, br, kind, err := c.connect()
	if err != nil {
		c.fail(kind, err)
		return
	}
	c.bp.p.wg.Add(1)
	go c.readLoop(br)

	var batch []*wireReq
	var bufs, toWrite net.Buffers // toWrite escapes: declared once, not per batch
	for {
		batch = c.takeBatch(batch[:0])
		if batch == nil {
			return
		}
		bufs = bufs[:0]
		for _, r := range batch {
			if r.parts != nil {
				bufs = append(bufs, r.parts...)
			} else {
				bufs = append(bufs, *r.frame)
			}
		}
		_ = nc.SetWriteDeadline(time.Now().Add(c.bp.p.cfg.WriteTimeout))
		toWrite = bufs // WriteTo consumes its receiver
		n, err := toWrite.WriteTo(nc)
		c.afterWrite(batch, n)
		// The batch's requests live on in its backing array until the next
		// batch overwrites them, and each holds its response frame once
		// answered: clear, or the last batch pins up to writeBatchBytes of
		// requests' answers for as long as the connection lives.
		clear(batch)
		clear(bufs)
		if err != nil {
			c.fail(ioKind(err, kindWrite), fmt.Errorf("write: %w", err))
			return
		}
	}
}

// takeBatch waits for queued requests and takes up to writeBatchBytes of
// them (at least one). It returns nil once the connection has failed.
func (c *conn) takeBatch(batch []*wireReq) []*wireReq {
	for {
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return nil
		}
		if len(c.queue) > 0 {
			size, i := 0, 0
			for ; i < len(c.queue) && (i == 0 || size+c.queue[i].size <= writeBatchBytes); i++ {
				r := c.queue[i]
				size += r.size
				r.state = stWriting
				batch = append(batch, r)
			}
			rest := copy(c.queue, c.queue[i:])
			clear(c.queue[rest:])
			c.queue = c.queue[:rest]
			c.mu.Unlock()
			return batch
		}
		idleFor := c.idleWaitLocked()
		c.mu.Unlock()
		if idleFor == 0 {
			select {
			case <-c.wake:
			case <-c.dead:
			}
			continue
		}
		if idleFor < 0 {
			if c.closeIfIdle(errIdle) {
				return nil
			}
			continue
		}
		t := time.NewTimer(idleFor)
		select {
		case <-c.wake:
		case <-c.dead:
		case <-t.C:
		}
		t.Stop()
	}
}

// idleWaitLocked is how long the writer may sleep before checking whether
// an idle-closing connection has been idle long enough: 0 for connections
// that never close when idle, negative when it is time to close.
func (c *conn) idleWaitLocked() time.Duration {
	if c.idle <= 0 {
		return 0
	}
	if len(c.inflight) > 0 {
		return c.idle
	}
	if left := c.idle - time.Since(c.idleSince); left > 0 {
		return left
	}
	return -1
}

// afterWrite records which frames of batch were fully written (the first n
// bytes): those may have reached the broker; the rest definitely did not.
func (c *conn) afterWrite(batch []*wireReq, n int64) {
	now := time.Now()
	var acked []*wireReq
	var off int64
	c.mu.Lock()
	for _, r := range batch {
		off += int64(r.size)
		c.bp.p.bufs.Put(r.frame)
		r.frame = nil
		r.giveBack() // the write returned: it reads the parts no more
		switch {
		case r.state != stWriting: // answered already, or failed by the reader
		case off > n:
			r.state = stQueued
		case r.noResp:
			c.removeLocked(r)
			acked = append(acked, r)
		default:
			r.state, r.deadline = stWritten, c.deadlineLocked(now, r.patience)
			heap.Push(&c.written, r)
		}
	}
	c.armReadDeadlineLocked()
	c.mu.Unlock()
	for _, r := range acked {
		r.complete(nil, nil)
	}
}

// deadlineLocked is when a request written at now with the given patience
// must have been answered. A broker that answers in order starts on it only
// after answering everything written before, so its allowance begins no
// earlier than the previous request's deadline: a long poll or a held
// JoinGroup ahead of it is not a hung broker.
func (c *conn) deadlineLocked(now time.Time, patience time.Duration) time.Time {
	start := now
	if !c.unordered && c.lastDeadline.After(now) {
		start = c.lastDeadline
	}
	c.lastDeadline = start.Add(patience)
	return c.lastDeadline
}

// readLoop hands each response to the request with its correlation id.
func (c *conn) readLoop(br *bufio.Reader) {
	defer c.bp.p.wg.Done()
	for {
		frame, err := readFrame(br, c.bp.p.bufs)
		if err != nil {
			c.failRead(err)
			return
		}
		buf := *frame
		corr := int32(binary.BigEndian.Uint32(buf))
		c.mu.Lock()
		r := c.inflight[corr]
		if r == nil || r.state == stQueued {
			c.mu.Unlock()
			c.fail(kindProtocol, fmt.Errorf("response for unknown correlation id %d: %w", corr, errProtocol))
			return
		}
		c.removeLocked(r)
		c.armReadDeadlineLocked()
		orphan := r.orphan
		c.mu.Unlock()
		if orphan { // its caller gave up: nobody will Release the frame
			c.bp.p.bufs.Put(frame)
			r.complete(nil, errOrphan)
			continue
		}

		off := 4
		if r.flexResp {
			n, err := kwire.SkipTags(buf[off:])
			if err != nil {
				err = fmt.Errorf("response header: %w: %w", err, errProtocol)
				r.complete(nil, fmt.Errorf("broker %d (%s): %w", c.bp.id, c.bp.addr, err))
				c.fail(kindProtocol, err)
				return
			}
			off += n
		}
		r.completeFrame(frame, off)
	}
}

func (c *conn) failRead(err error) {
	c.mu.Lock()
	idle := len(c.inflight) == 0
	c.mu.Unlock()
	kind := ioKind(err, kindRead)
	switch {
	case errors.Is(err, errProtocol):
		kind = kindProtocol
	case idle && kind == kindRead:
		kind = kindClosed // a broker may close idle connections; not an error
	case kind == kindTimeout:
		err = fmt.Errorf("a request got no response within its deadline (ReadTimeout %s plus its own timeout): %w", c.bp.p.cfg.ReadTimeout, err)
	}
	c.fail(kind, fmt.Errorf("read: %w", err))
}

func ioKind(err error, def string) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return kindTimeout
	}
	if errors.Is(err, net.ErrClosed) {
		return kindClosed
	}
	return def
}
