// Package upstream keeps pooled connections to brokers; it is the Sender
// behind the proxy's apis package, and imports nothing of the proxy above
// it: the types that cross (Request, Hold, Body, Pending) are defined here.
//
// Requests with equal affinity (the client connection) to one broker are
// written in the order Send was called. Each connection gets its own
// correlation ids, identifies itself with ApiVersions and matches responses
// by correlation id. A broken connection fails only its own requests: those
// not fully written with retry.ErrNotSent, those written with an ambiguous
// error. A new one is dialed on the next Send, with backoff after dial
// failures.
//
// How many connections follows the broker, which the first connection's
// ApiVersions handshake tells. A broker that advertises the supported
// feature "kproxy.unordered-responses" (v1) answers each request when ready:
// every request shares ConnsPerBroker multiplexed connections, the one its
// affinity selects. Any other broker (Apache Kafka, KafScale, kfake) works
// on one request per connection at a time, so strangers sharing a
// connection would wait for each other: each affinity with requests
// outstanding gets a connection of its own, opened on demand up to
// MaxConnsPerBroker, reused when idle and closed after IdleTimeout
// (serial.go); at the limit Send waits for one until its context ends. The
// first connection stays open as the one Pool.ApiVersions asks. Requests
// such a broker may hold for long (Hold.Long, set by the caller from the
// decoded request) go to a connection dedicated to their affinity instead
// (lanes.go): reused for that affinity's later long requests, closed after
// BlockingConnIdle without requests, at most MaxBlockingConnsPerBroker per
// broker. Requests of one affinity keep their order among the short ones
// (all produces) and among the long ones, not across the two.
//
// Lent pieces: a VecBody (produce record sets) is written from the caller's
// memory instead of being copied into the frame. The pool reads that memory
// until the request's write returned, or until it was withdrawn or failed
// while still queued, and only then gives the pieces back; Lender.Reclaim
// waits for that (withdrawing a queued request), at most WriteTimeout. A
// request abandoned by Wait (context ended) while being written keeps its
// pieces until the write ends, so its caller must Reclaim before reusing
// them: the proxy reuses a client's request frame for other clients.
package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/retry"
)

const (
	softwareName    = "kproxy"
	softwareVersion = "0.1"
)

// Config configures a Pool. Zero values take the documented defaults.
type Config struct {
	// Resolve returns a live broker's address (from routing.Table).
	Resolve func(broker int32) (addr string, ok bool)
	// ConnsPerBroker is the number of multiplexed connections per broker
	// that answers out of order (default 4).
	ConnsPerBroker int
	// MaxConnsPerBroker bounds the on-demand connections to a broker that
	// answers in order, one per client connection with requests
	// outstanding (default 256: 64 producers on each of 4 proxies' worth of
	// clients are not capped). At the bound Send waits for one to free up.
	MaxConnsPerBroker int
	// IdleTimeout closes an on-demand connection that has carried no
	// request this long (default 60s, below Kafka's connections.max.idle.ms
	// of 10 minutes, so that the proxy, not the broker, closes it).
	IdleTimeout time.Duration
	// Now is the pool's clock for idle times (default time.Now; tests
	// inject one).
	Now func() time.Time
	// MaxInFlightPerConn bounds requests queued or awaiting a response on
	// one connection (default 256); Send waits for room.
	MaxInFlightPerConn int
	// DialTimeout bounds dialing plus the ApiVersions handshake (default 10s).
	DialTimeout time.Duration
	// WriteTimeout bounds one batched write (default 10s).
	WriteTimeout time.Duration
	// ReadTimeout is how long a written request may wait for its response,
	// on top of the request's own timeout (a produce's timeout, a fetch's
	// max wait, the caller's context deadline), before its connection is
	// taken for hung and fails (default 30s). The caller's context also
	// bounds Pending.Wait.
	ReadTimeout time.Duration
	// MaxBlockingConnsPerBroker bounds the dedicated connections per broker
	// that carry requests a broker may hold for long (long polls, JoinGroup,
	// SyncGroup) to brokers answering in order (default 256). At the bound
	// an idle one is closed, else Send waits for one to free up.
	MaxBlockingConnsPerBroker int
	// BlockingConnIdle closes a dedicated connection that has had no
	// request in flight this long (default 30s).
	BlockingConnIdle time.Duration
	// TLS, if set, gives the TLS configuration of each new broker
	// connection (host is the broker's host); nil dials plain TCP.
	TLS func(host string) *tls.Config
	// SASL, if set, authenticates each broker connection after its
	// ApiVersions handshake (franz-go's pkg/sasl: plain, scram).
	SASL sasl.Mechanism
	// ClientID is the client id of the handshake and of requests sent
	// without the client's own (default "kproxy").
	ClientID string
	// MaxBrokers bounds the per-broker pools kept (default 1024); the least
	// recently used one is closed when a new broker would exceed it.
	MaxBrokers int
	// BackoffMin and BackoffMax bound the wait before redialing a broker
	// after consecutive dial failures (defaults 50ms and 5s).
	BackoffMin, BackoffMax time.Duration
	// Bufs holds the request and response frames; the proxy passes the
	// one pool its layers share (nil: the Pool makes its own).
	Bufs       *kwire.BufPool
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	defInt(&c.ConnsPerBroker, 4)
	defInt(&c.MaxConnsPerBroker, 256)
	def(&c.IdleTimeout, 60*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	defInt(&c.MaxInFlightPerConn, 256)
	defInt(&c.MaxBrokers, 1024)
	defInt(&c.MaxBlockingConnsPerBroker, 256)
	def(&c.BlockingConnIdle, 30*time.Second)
	def(&c.DialTimeout, 10*time.Second)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.ReadTimeout, 30*time.Second)
	def(&c.BackoffMin, 50*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
	if c.ClientID == "" {
		c.ClientID = softwareName
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Bufs == nil {
		c.Bufs = new(kwire.BufPool)
	}
	if c.Resolve == nil {
		c.Resolve = func(int32) (string, bool) { return "", false }
	}
}

// Pool forwards requests to brokers.
type Pool struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	flex kwire.FlexTable
	bufs *kwire.BufPool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every connection goroutine
	closed atomic.Bool

	mu      sync.Mutex // serializes creating, replacing and removing broker pools
	brokers *lru.Cache[int32, *brokerPool]
	// byID is a copy of brokers, republished under mu after every change,
	// that Send reads without locking: the LRU locks on every Get, and
	// Prune, which routing changes drive, holds that lock while it scans.
	byID atomic.Pointer[map[int32]*brokerPool]
}

var (
	errPoolClosed = errors.New("upstream pool closed")
	errEvicted    = errors.New("broker pool evicted or broker gone")
)

// NewPool returns a pool; connections are dialed on first use.
func NewPool(cfg Config) *Pool {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer), flex: kwire.NewFlexTable(), bufs: cfg.Bufs, ctx: ctx, cancel: cancel}
	p.brokers, _ = lru.NewWithEvict(cfg.MaxBrokers, func(_ int32, bp *brokerPool) { bp.close(errEvicted) })
	p.wg.Add(1)
	go p.janitor()
	return p
}

func (p *Pool) now() time.Time { return p.cfg.Now() }

// Send appends req's body to a request frame and queues it on the
// connection to broker that affinity selects (see the package comment). It
// waits for the first connection's handshake, while that connection is
// full, and, when the broker answers in order, for a free connection at the
// limit. Requests with equal affinity for one broker are written in the
// order Send was called (long ones among themselves, on their dedicated
// connection). Its errors wrap retry.ErrNotSent. A request
// with Hold.NoResponse gets a Pending that returns a nil body once the
// request is written. Send does not keep req.Body after it returns, but
// keeps the pieces of a VecBody until they are reclaimed (see Lender).
//
// Pending.Wait returns the response body (header stripped), or an error
// wrapping retry.ErrNotSent when the request never fully reached the broker
// (dial or handshake failure, connection lost before the write). If Wait's
// context ends first, a request still queued is withdrawn (ErrNotSent); a
// written one gets an ambiguous error and its late response is discarded.
func (p *Pool) Send(ctx context.Context, broker int32, affinity uint64, req Request) (Pending, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("send to broker %d: %w: %w", broker, retry.ErrNotSent, errPoolClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("send to broker %d: %w: %w", broker, retry.ErrNotSent, context.Cause(ctx))
	}
	flexible, known := p.flex.Lookup(req.Key, req.Version)
	if !known {
		return nil, fmt.Errorf("send to broker %d: %w: unknown api key %d version %d", broker, retry.ErrNotSent, req.Key, req.Version)
	}
	bp, err := p.brokerPool(broker)
	if err != nil {
		return nil, fmt.Errorf("send to broker %d: %w: %w", broker, retry.ErrNotSent, err)
	}
	r := &wireReq{flexResp: kwire.ResponseHeaderFlexible(req.Key, flexible), done: make(chan struct{})}
	id := &p.cfg.ClientID
	if req.ClientID != nil {
		id = req.ClientID
	}
	vb, vec := req.Body.(VecBody)
	hint := req.Body.SizeHint()
	if vec {
		hint = vb.VecSizeHint()
	}
	r.frame = p.bufs.Get(4 + 10 + len(*id) + 1 + hint)
	*r.frame = kwire.AppendRequestHeader(*r.frame, req.Key, req.Version, 0, id, flexible)
	var pieces [][]byte
	hdr := len(*r.frame)
	if vec {
		*r.frame, pieces = vb.AppendVec(*r.frame)
	} else {
		*r.frame = req.Body.AppendBody(*r.frame)
	}
	r.lend(hdr, pieces)
	binary.BigEndian.PutUint32(*r.frame, uint32(r.size-4))
	r.noResp = req.Hold.NoResponse
	r.patience = p.patience(ctx, max(req.Hold.Allowance, 0))
	for attempt := 1; ; attempt++ {
		c, err := bp.connFor(ctx, affinity, req.Hold.Long)
		if err == nil {
			if err = c.enqueue(ctx, r); err != nil {
				c.refused()
			}
		}
		if err == nil {
			return r, nil
		}
		// A connection closing as idle (or reclaimed), or failing between
		// being chosen and taking the request, refuses it before writing
		// anything: take a fresh one.
		fresh := errors.Is(err, errIdle) || errors.Is(err, errLaneReclaimed) || (c != nil && c.dying.Load())
		if attempt < 3 && fresh && ctx.Err() == nil {
			continue
		}
		p.bufs.Put(r.frame)
		r.giveBack() // never queued: nothing writes it
		if !errors.Is(err, retry.ErrNotSent) {
			err = fmt.Errorf("send to broker %d: %w: %w", broker, retry.ErrNotSent, err)
		}
		return nil, err
	}
}

// ApiVersions returns what broker advertised in the ApiVersions handshake
// of its connections (the pool asks each connection once; nobody else
// needs to ask again), dialing one if none is open.
func (p *Pool) ApiVersions(ctx context.Context, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error) {
	bp, err := p.brokerPool(broker)
	if err != nil {
		return nil, fmt.Errorf("ApiVersions of broker %d: %w", broker, err)
	}
	c, err := bp.conn(0)
	if err != nil {
		return nil, fmt.Errorf("ApiVersions of broker %d: %w", broker, err)
	}
	if err := c.handshaken(ctx); err != nil {
		return nil, fmt.Errorf("ApiVersions of broker %d: %w", broker, err)
	}
	if c.hello == nil {
		return nil, fmt.Errorf("ApiVersions of broker %d: handshake answer did not decode: %w", broker, errProtocol)
	}
	return c.hello.ApiKeys, nil
}

// patience is how long a response to a request may take after its write:
// ReadTimeout on top of the request's own allowance or the caller's
// deadline, whichever is longer.
func (p *Pool) patience(ctx context.Context, own time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		own = max(own, time.Until(dl))
	}
	return p.cfg.ReadTimeout + own
}

// brokerPool returns the pool for broker at its current address, replacing
// a pool whose broker moved and dropping one whose broker left. The common
// case (the pool exists and is current) takes no lock.
func (p *Pool) brokerPool(id int32) (*brokerPool, error) {
	addr, ok := p.cfg.Resolve(id)
	cur := p.published(id)
	if !ok {
		if cur != nil {
			p.mu.Lock()
			p.brokers.Remove(id)
			p.publishLocked()
			p.mu.Unlock()
		}
		return nil, fmt.Errorf("broker %d is not live", id)
	}
	if cur != nil && cur.addr == addr && !cur.closed.Load() {
		return cur, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, errPoolClosed
	}
	if bp, ok := p.brokers.Peek(id); ok {
		if bp.addr == addr && !bp.closed.Load() {
			return bp, nil
		}
		p.brokers.Remove(id)
	}
	bp := newBrokerPool(p, id, addr)
	p.brokers.Add(id, bp) // may evict (and close) the least recently created pool
	p.publishLocked()
	return bp, nil
}

func (p *Pool) published(id int32) *brokerPool {
	if m := p.byID.Load(); m != nil {
		return (*m)[id]
	}
	return nil
}

// publishLocked republishes the LRU's pools for lock-free reads.
func (p *Pool) publishLocked() {
	m := make(map[int32]*brokerPool, p.brokers.Len())
	for _, id := range p.brokers.Keys() {
		if bp, ok := p.brokers.Peek(id); ok {
			m[id] = bp
		}
	}
	p.byID.Store(&m)
}

// Prune closes the pools of brokers that left or moved. Call it when the
// routing table changes; Send also notices on its own.
func (p *Pool) Prune() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range p.brokers.Keys() {
		bp, ok := p.brokers.Peek(id)
		if !ok {
			continue
		}
		if addr, live := p.cfg.Resolve(id); !live || addr != bp.addr {
			p.brokers.Remove(id)
		}
	}
	p.publishLocked()
}

// Close closes every connection, failing their requests, and waits for the
// pool's goroutines to end. Send fails after Close.
func (p *Pool) Close() {
	p.closed.Store(true)
	p.mu.Lock()
	p.brokers.Purge()
	p.publishLocked()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}
