package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/listener"
)

const (
	keySaslAuthenticate = int16(kmsg.SASLAuthenticate)
	keyFetch            = int16(kmsg.Fetch) // one at a time per connection (sequencer.fetchTurn)
)

// clientReadBufferBytes keeps an idle connection small: frames larger than
// this are read straight into a pooled frame buffer.
const clientReadBufferBytes = 4 << 10

// clientConn is one Kafka client connection: a reader goroutine that reads
// frames and begins calls in order, a writer goroutine that writes responses
// in request order, and one short-lived goroutine per outstanding request,
// which writes its own response instead when it completes an idle line
// (sequencer.go: the writer is a role).
type clientConn struct {
	s      *Server
	id     uint64
	nc     net.Conn
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelCauseFunc
	seq    *sequencer

	draining  atomic.Bool
	closeOnce sync.Once
	calls     sync.WaitGroup // per-request goroutines

	info    *apis.ConnInfo // listener and principal, in ctx for the dispatcher
	gate    listener.Gate  // authentication (package listener)
	part    *holder        // its unfinished frame in the budget's shares (fair.go)
	arrival frameArrival   // what the frame being read gave as it arrived (framearrival.go)

	clientID   []byte // the last client id seen, to reuse its *string
	clientPtr  *string
	mutedUntil atomic.Int64 // unix ns: a quota throttle holds the next request (throttle.go)
	quotaCache atomic.Pointer[quotaLookup]

	// wbufs and wvec are the writer's (sequencer.go): only the goroutine
	// holding the writer's role uses them.
	wbufs, wvec net.Buffers
}

func newClientConn(s *Server, id uint64, nc net.Conn, bl *listener.Bound) *clientConn {
	ctx, cancel := context.WithCancelCause(s.connCtx)
	info := apis.NewConnInfo(bl.Name, bl.Host, bl.Port)
	info.Client = clientHost(nc.RemoteAddr())
	c := &clientConn{
		s: s, id: id, nc: bl.Wrap(nc), ctx: apis.WithConnInfo(ctx, info), cancel: cancel, info: info,
		log: s.log.With("conn", id, "remote", nc.RemoteAddr().String(), "listener", bl.Name),
		seq: newSequencer(s.cfg.MaxInFlightPerConn, max(s.g.lim.MaxUnsentBytesPerConn, 0), s.m.mutes.Inc),
	}
	c.arrival = frameArrival{want: s.d.frameArrival, pool: &s.arrivalPool}
	c.part = newHolder(info.Client, func(reason string, err error) {
		s.g.report(c, reason, "closing client connection holding the largest unfinished frame", "err", err)
		c.close(err)
	})
	c.gate.Init(s.sec, listener.Conn{ID: id, NC: c.nc, Listener: bl, Info: info, Log: c.log, Close: c.close})
	return c
}

// clientHost is the client's IP address as Kafka's ACLs name hosts.
func clientHost(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// serve runs the connection until it is closed; it returns once every
// goroutine of the connection has ended.
func (c *clientConn) serve() {
	defer c.closeSecurity()
	if !c.gate.Open(c.ctx) {
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	c.readLoop()
	<-writerDone
	c.calls.Wait()
	c.close(nil)
}

// close ends the connection at once; outstanding responses are dropped.
func (c *clientConn) close(cause error) {
	c.closeOnce.Do(func() {
		if cause != nil {
			c.cancel(cause)
		} else {
			c.cancel(errConnClosed)
		}
		c.seq.close()
		c.nc.Close()
	})
}

var (
	errConnClosed = errors.New("client connection closed")
	errDraining   = errors.New("proxy shutting down")
)

// drain stops reading requests; outstanding ones still get their responses,
// then the connection closes.
func (c *clientConn) drain() {
	c.draining.Store(true)
	_ = c.nc.SetReadDeadline(time.Now()) // wakes a reader blocked in Read
}

func (c *clientConn) readLoop() {
	cr := newConnReader(c)
	br := bufio.NewReaderSize(cr, clientReadBufferBytes)
	for {
		t, err := c.seq.reserve(c.ctx)
		if err != nil {
			return
		}
		if err := c.readOne(cr, br, t); err != nil {
			if errors.Is(err, errLastRequest) { // its answer goes out, then the close
				c.seq.closeInput(0, false)
				return
			}
			c.endRead(err) // first: a bad frame's reason is logged before the close is visible
			c.seq.closeInput(t, true)
			return
		}
	}
}

// endRead decides what a read failure means: a drain lets outstanding
// responses finish; a bad frame (logged with its reason), a client that went
// away or a broken socket closes the connection at once.
func (c *clientConn) endRead(err error) {
	var bad *badFrameError
	var denied *listener.Refused
	switch {
	case errors.As(err, &denied):
		c.gate.Refuse(denied.Reason, denied.Err)
	case c.draining.Load() && errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Debug("client connection draining")
	case errors.As(err, &bad):
		c.s.m.fail(bad.key, codeInvalidRequest)
		c.s.g.report(c, bad.reason, "closing client connection", "err", bad.Error())
		c.close(err)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.Debug("client connection closed by client")
		c.close(err)
	default:
		c.log.Debug("client connection read failed", "err", err)
		c.close(err)
	}
}

// badFrameError is a frame the proxy cannot or will not serve.
type badFrameError struct {
	key    int16
	reason string // label of kproxy_bad_input_total
	err    error
}

func (e *badFrameError) Error() string { return e.err.Error() }
func (e *badFrameError) Unwrap() error { return e.err }

// readOne reads one request frame and begins its call under ticket t.
func (c *clientConn) readOne(cr *connReader, br *bufio.Reader, t uint64) error {
	if err := cr.startFrame(br); err != nil {
		return err
	}
	n, err := kwire.ReadSize(br)
	if err != nil {
		return err
	}
	start := time.Now()
	if limit := c.gate.FrameLimit(c.s.cfg.MaxFrameBytes); n < 0 || n > limit {
		return &badFrameError{key: -1, reason: badFrameSize, err: fmt.Errorf("frame of %d bytes (max %d)", n, limit)}
	}
	c.arrival.start()
	defer c.arrival.release() // once the frame's call has begun
	buf, err := c.s.g.readFrame(c.ctx, c.part, br, c.s.bufs, int(n), cr.queued, &c.arrival)
	cr.endFrame()
	if err != nil {
		return err
	}
	frame := *buf
	c.s.m.bytesIn.Add(float64(4 + n))
	if c.gate.RawNext() {
		a, last := c.gate.RawToken(frame)
		return c.begun(t, reqHeader{RequestHeader: kwire.RequestHeader{Key: keySaslAuthenticate}, raw: true}, a, last, start, buf)
	}
	kh, err := kwire.ParseRequestHeader(frame, c.s.flex)
	h := reqHeader{RequestHeader: kh}
	if err != nil {
		c.s.g.put(c.s.bufs, buf)
		return &badFrameError{key: h.Key, reason: headerReason(err), err: fmt.Errorf("request header: %w", err)}
	}
	am := c.s.m.api(h.Key)
	am.requests.Inc()
	if !h.Known {
		c.s.m.fail(h.Key, codeUnsupported)
	}
	a, last, err := c.gate.Request(h.Key, h.Version, frame[h.BodyOff:])
	if err != nil {
		c.s.g.put(c.s.bufs, buf)
		return err
	}
	var cl call
	if a != nil { // answered by the gate (SASL)
		cl = a
	}
	var cost quotaCost
	if cl == nil {
		if err := c.waitMuted(); err != nil {
			c.s.g.put(c.s.bufs, buf) // and its budget
			return err
		}
		if h.Key == keyFetch {
			if err := c.seq.fetchTurn(c.ctx, t); err != nil {
				c.s.g.put(c.s.bufs, buf)
				return err
			}
		}
		cid := c.internClientID(&h)
		cost.client = derefClientID(cid)
		c.chargeProduce(h.Key, 4+int(n), &cost)
		began := time.Now()
		cl = c.s.d.disp.Begin(c.ctx, c.id, apis.Header{
			Key: h.Key, Version: h.Version, CorrelationID: h.Corr, ClientID: cid, Arrival: c.arrival.bind(frame),
		}, frame[h.BodyOff:])
		cost.begin = time.Since(began)
	}
	h.ClientID = nil // aliases frame
	c.calls.Add(1)
	go c.finish(t, h, cl, am, start, buf, cost)
	if last {
		return errLastRequest
	}
	return nil
}

// begun finishes a call answered by the connection itself.
func (c *clientConn) begun(t uint64, h reqHeader, cl call, last bool, start time.Time, buf *[]byte) error {
	c.calls.Add(1)
	go c.finish(t, h, cl, c.s.m.api(h.Key), start, buf, quotaCost{})
	if last {
		return errLastRequest
	}
	return nil
}

// errLastRequest: the request just begun is the last one served; its answer
// is written, then the connection closes.
var errLastRequest = errors.New("last request of the connection")

// closeSecurity ends the connection's security state with the reason it
// closed (none for an ordinary close).
func (c *clientConn) closeSecurity() {
	cause := context.Cause(c.ctx)
	if errors.Is(cause, errConnClosed) {
		cause = nil
	}
	c.gate.Close(cause)
}

// internClientID returns the header's client id, reusing the last one's
// string: a client sends the same id on every request.
func (c *clientConn) internClientID(h *reqHeader) *string {
	if h.NullClientID {
		return nil
	}
	if c.clientPtr == nil || string(c.clientID) != string(h.ClientID) {
		s := string(h.ClientID)
		c.clientID, c.clientPtr = append(c.clientID[:0], h.ClientID...), &s
	}
	return c.clientPtr
}

// finish waits for one call and hands its response to the sequencer. The
// call reads the request frame in buf until Finish returns.
func (c *clientConn) finish(t uint64, h reqHeader, call call, am *apiMetrics, start time.Time, buf *[]byte, cost quotaCost) {
	defer c.calls.Done()
	reply, err := call.Finish(c.ctx)
	c.s.g.put(c.s.bufs, buf)
	am.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		if c.ctx.Err() == nil {
			c.s.m.fail(h.Key, codeDispatch)
			c.s.g.report(c, badRequest, "closing client connection", "api", apiName(h.Key), "version", h.Version, "err", err)
		}
		c.close(fmt.Errorf("%s v%d: %w", apiName(h.Key), h.Version, err))
		return
	}
	c.chargeReply(h.Key, h.Version, &reply, cost)
	if reply.NoResponse {
		c.seq.complete(t, response{skip: true}) // a skip never makes its caller the writer
		return
	}
	r := responseHeader(&h, bodyLen(reply.Body, reply.Parts))
	r.body, r.parts, r.done = reply.Body, reply.Parts, reply.Release
	if batch := c.seq.complete(t, r); batch != nil { // the writer's role is ours (sequencer.go)
		c.writeBatch(batch)
	}
}

// writeLoop writes responses in request order, batching those ready
// together into one vectored write, whenever the request that completed
// the head of the line did not write them itself.
func (c *clientConn) writeLoop() {
	var batch []response
	for {
		var err error
		batch, err = c.seq.take(c.ctx, batch[:0])
		if err != nil {
			if errors.Is(err, io.EOF) { // input closed and everything written
				c.close(nil)
			}
			return
		}
		if !c.writeBatch(batch) {
			return
		}
	}
}

// writeBatch writes batch, which its caller took as the connection's
// writer, in one vectored write, releases it and gives up the writer's
// role; false means the write failed and the connection is closed.
func (c *clientConn) writeBatch(batch []response) bool {
	bufs := c.wbufs[:0]
	total := 0
	for i := range batch {
		r := &batch[i]
		bufs = append(bufs, r.hdr[:r.hlen])
		if len(r.body) > 0 {
			bufs = append(bufs, r.body)
		}
		for _, p := range r.parts {
			if len(p) > 0 {
				bufs = append(bufs, p)
			}
		}
		total += r.bytes()
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	// WriteTo consumes its receiver, which escapes: a field, not a local,
	// or every write would allocate one.
	c.wvec = bufs
	n, err := c.wvec.WriteTo(c.nc)
	c.s.m.bytesOut.Add(float64(n))
	for i := range batch {
		if done := batch[i].done; done != nil {
			done()
		}
	}
	clear(batch)
	clear(bufs)
	c.wbufs = bufs
	if err != nil {
		c.log.Debug("client write failed", "err", err, "pending_bytes", total-int(n))
		c.close(fmt.Errorf("write: %w", err))
		return false
	}
	c.seq.written()
	return true
}
