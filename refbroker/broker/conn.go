package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

const (
	// maxInFlight bounds the requests one connection may have open; the read
	// loop stops reading while it is reached (backpressure, not a stall of
	// other connections). A proxy parks many clients' long polls on one
	// connection, hence the generous bound.
	maxInFlight = 1024
	// writeTimeout bounds one flush to a client that does not read.
	writeTimeout = 30 * time.Second
	// minHeaderLen is api key, api version and correlation id.
	minHeaderLen = 8
)

// header is a decoded request header.
type header struct {
	key      int16
	version  int16
	corr     int32
	clientID *string
}

// slot is one response on its way to the writer.
type slot struct {
	done  chan struct{}
	frame []byte // the whole response frame; nil: send nothing
}

// conn serves one client connection.
type conn struct {
	b      *Broker
	nc     net.Conn
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	out       chan *slot    // to the writer
	sem       chan struct{} // in-flight requests
	unordered atomic.Bool   // ApiVersions said "kproxy": answer when ready
	handlers  sync.WaitGroup
}

func newConn(b *Broker, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(b.runCtx)
	return &conn{
		b: b, nc: nc, ctx: ctx, cancel: cancel,
		log: b.log.With("client", nc.RemoteAddr().String()),
		out: make(chan *slot, maxInFlight),
		sem: make(chan struct{}, b.maxInFlight()),
	}
}

// serve runs the connection until the client goes away, a request is
// rejected, or the broker stops. It closes the socket.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.write()
	}()
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && c.ctx.Err() == nil {
		c.log.Info("closing client connection", "reason", err)
	}
	c.cancel()
	c.nc.Close()
	c.handlers.Wait()
	<-writerDone
}

func (c *conn) readLoop() error {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, err := kwire.ReadFrame(r, minHeaderLen, c.b.cfg.MaxFrameBytes, nil)
		if err != nil {
			return fmt.Errorf("read request frame: %w", err)
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
		if err := c.dispatch(*frame); err != nil {
			<-c.sem
			return err
		}
	}
}

// dispatch decodes one request and starts answering it. Produce requests are
// queued to their partitions before dispatch returns, so they apply in the
// order the connection sent them.
func (c *conn) dispatch(frame []byte) error {
	h, req, err := c.decode(frame)
	if err != nil {
		if h.key == int16(kmsg.ApiVersions) && errors.Is(err, errUnsupported) {
			c.respondNow(h, c.b.unsupportedApiVersions())
			return nil
		}
		return err
	}
	c.b.metrics.request(h.key)
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		if c.b.answersUnordered(r) {
			c.unordered.Store(true)
		}
		c.respondNow(h, c.b.apiVersions(r))
		return nil
	case *kmsg.ProduceRequest:
		wait := c.b.beginProduce(c.ctx, r)
		if r.Acks == 0 {
			c.handlers.Add(1)
			go func() {
				defer c.handlers.Done()
				defer func() { <-c.sem }()
				wait(c.ctx)
			}()
			return nil
		}
		c.async(h, func(ctx context.Context) kmsg.Response { return wait(ctx) })
		return nil
	}
	handle := implemented[kmsg.Key(h.key)].handle // supported: decode checked
	c.async(h, func(ctx context.Context) kmsg.Response { return handle(c.b, ctx, c, h, req) })
	return nil
}

var errUnsupported = errors.New("unsupported api key or version")

// wireFlex says which request versions have flexible headers (immutable).
var wireFlex = kwire.NewFlexTable()

// decode parses the request header and body. The returned header is valid
// whenever its key and version could be read.
func (c *conn) decode(frame []byte) (header, kmsg.Request, error) {
	kh, err := kwire.ParseRequestHeader(frame, wireFlex)
	h := header{key: kh.Key, version: kh.Version, corr: kh.Corr}
	if len(frame) < minHeaderLen {
		return h, nil, err
	}
	if !c.b.supports(h.key, h.version) {
		return h, nil, fmt.Errorf("%s (key %d) version %d: %w", kmsg.NameForKey(h.key), h.key, h.version, errUnsupported)
	}
	if err != nil {
		return h, nil, fmt.Errorf("%s v%d: malformed request header: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	if !kh.NullClientID {
		id := string(kh.ClientID)
		h.clientID = &id
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := readBody(req, frame[kh.BodyOff:]); err != nil {
		return h, nil, fmt.Errorf("%s v%d: malformed request body: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

// readBody decodes without copying for produce (the frame is not reused and
// record bytes are copied once, into the segment) and safely otherwise.
func readBody(req kmsg.Request, body []byte) error {
	if u, ok := req.(kmsg.UnsafeReadFrom); ok && req.Key() == int16(kmsg.Produce) {
		return u.UnsafeReadFrom(body)
	}
	return req.ReadFrom(body)
}

// async answers h on a goroutine of its own.
func (c *conn) async(h header, fn func(ctx context.Context) kmsg.Response) {
	s := &slot{done: make(chan struct{})}
	ordered := !c.unordered.Load()
	if ordered {
		c.out <- s // never blocks: out has room for every in-flight request
	}
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		resp := fn(c.ctx)
		s.frame = c.frame(h, resp)
		close(s.done)
		if !ordered {
			c.out <- s
		}
	}()
}

func (c *conn) respondNow(h header, resp kmsg.Response) {
	s := &slot{done: make(chan struct{}), frame: c.frame(h, resp)}
	close(s.done)
	c.out <- s
}

// frame encodes a response with its header. ApiVersions always answers with
// response header v0 so that a client on an unknown version can read it.
func (c *conn) frame(h header, resp kmsg.Response) []byte {
	if resp == nil {
		return nil
	}
	buf := kwire.AppendResponseHeader(make([]byte, 0, 256), h.corr, kwire.ResponseHeaderFlexible(h.key, resp.IsFlexible()))
	buf = resp.AppendTo(buf)
	kwire.FinishFrame(buf)
	return buf
}

// write sends responses: in request order, or as they finish on a kproxy
// connection (those slots reach out only when done). It flushes whenever it
// would otherwise wait.
func (c *conn) write() {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	flush := func() bool {
		if w.Buffered() == 0 {
			return true
		}
		c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err := w.Flush(); err != nil {
			c.fail(fmt.Errorf("write responses: %w", err))
			return false
		}
		return true
	}
	for {
		var s *slot
		select {
		case s = <-c.out:
		default:
			if !flush() {
				return
			}
			select {
			case s = <-c.out:
			case <-c.ctx.Done():
				return
			}
		}
		select {
		case <-s.done:
		default:
			if !flush() {
				return
			}
			select {
			case <-s.done:
			case <-c.ctx.Done():
				return
			}
		}
		<-c.sem
		if s.frame == nil {
			continue
		}
		if _, err := w.Write(s.frame); err != nil {
			c.fail(fmt.Errorf("write response: %w", err))
			return
		}
	}
}

func (c *conn) fail(err error) {
	if c.ctx.Err() == nil {
		c.log.Info("closing client connection", "reason", err)
	}
	c.cancel()
	c.nc.Close()
}

// remoteHost is the client's address without the port, as Kafka reports it.
func (c *conn) remoteHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return c.nc.RemoteAddr().String()
	}
	return "/" + host
}
