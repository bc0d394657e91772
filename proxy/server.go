// Package proxy is the client-connection server: it accepts Kafka client
// connections on bound listeners, reads size-prefixed frames, pipelines each
// connection's requests through the dispatcher, writes responses strictly in
// request order, stops reading from a connection that has too much
// outstanding (backpressure), charges client quotas (throttle.go), and
// drains connections on shutdown.
//
// A malformed, oversize or unknown request closes only the connection it
// came on, with a logged reason; other clients never wait for it.
//
// Its limit: it serves what it is given. Listener security (TLS, SASL,
// principals) is package listener's Gate, which each connection consults;
// the routing table, the upstream pool, the dispatcher, the admin endpoint
// and their background work are built and run by package assembly.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/quota"
)

// dispatcher is what a connection needs of apis.Dispatcher; tests supply
// fakes.
type dispatcher interface {
	Begin(ctx context.Context, conn uint64, h apis.Header, body []byte) call
}

type call interface {
	Finish(ctx context.Context) (apis.Reply, error)
}

type apisDispatcher struct{ d *apis.Dispatcher }

func (a apisDispatcher) Begin(ctx context.Context, conn uint64, h apis.Header, body []byte) call {
	return a.d.Begin(ctx, conn, h, body)
}

// Config configures a Server's client connections. Zero values take the
// documented defaults.
type Config struct {
	MaxFrameBytes      int32         // largest client request frame (default 100 MiB)
	MaxInFlightPerConn int           // outstanding requests per client connection (default 64)
	DrainTimeout       time.Duration // how long shutdown waits for in-flight requests (default 10s)
	// WriteTimeout bounds one write to a client; a client that reads
	// nothing for this long is disconnected (default 30s).
	WriteTimeout time.Duration
	// BufTrimInterval is how often the frame pool gives back the large
	// frames no request took since the last time (default 10s): after a
	// burst, an idle proxy holds them for at most two intervals.
	BufTrimInterval time.Duration

	Limits   Limits // protection from large or hostile clients (guard.go)
	Logger   *slog.Logger
	Registry *prometheus.Registry // default: a new registry
}

func (c *Config) setDefaults() {
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = 100 << 20
	}
	if c.MaxInFlightPerConn <= 0 {
		c.MaxInFlightPerConn = 64
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.BufTrimInterval <= 0 {
		c.BufTrimInterval = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Limits.setDefaults()
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
}

// Parts are what a Server serves with; the assembly builds them.
type Parts struct {
	Dispatcher *apis.Dispatcher
	Security   *listener.Auth // nil: listeners without authentication
	Quotas     *quota.Manager // nil: no client quotas
	Bufs       *kwire.BufPool // the proxy's one frame pool (nil: its own)
	// AcceptAfter, if set, holds accepting until it is closed (the
	// authorizer's complete bindings: before them it would deny what they
	// allow); connections wait in the listen backlog meanwhile.
	AcceptAfter <-chan struct{}
}

// deps are a Server's parts as the connections use them; tests replace
// them.
type deps struct {
	disp        dispatcher
	sec         *listener.Auth
	quotas      *quota.Manager
	acceptAfter <-chan struct{}
	// bufs is the proxy's one frame pool, shared with the layers the
	// assembly builds (nil: newServer makes one). trimTicks starts the
	// ticker that paces its Trim (nil: time.NewTicker); stop ends it.
	bufs      *kwire.BufPool
	trimTicks func(every time.Duration) (ticks <-chan time.Time, stop func())
	// frameArrival names the request frames whose arrival (their CRC-32C
	// sums and record walks) the dispatcher uses
	// (apis.Dispatcher.FrameArrival; nil: none).
	frameArrival func(key int16) bool
}

// Server serves Kafka clients on bound listeners: create it with
// NewServer, then call Run once.
type Server struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	flex kwire.FlexTable
	bufs *kwire.BufPool // client frames; the same pool as upstream's and apis's
	g    *guard
	d    deps

	lns []*listener.Bound // Kafka listeners, in their configured order
	sec *listener.Auth    // authentication state shared by connections; nil: none

	connCtx     context.Context // parent of every client connection's context
	cancelConn  context.CancelCauseFunc
	nextID      atomic.Uint64
	mu          sync.Mutex
	conns       map[*clientConn]struct{}
	draining    atomic.Bool
	connWG      sync.WaitGroup
	arrivalPool sync.Pool // the connections' frame arrivals (framearrival.go)
}

// NewServer returns a server for listeners lns (bound; Run closes them)
// serving with p. Nothing runs until Run.
func NewServer(cfg Config, lns []*listener.Bound, p Parts) *Server {
	d := deps{
		disp: apisDispatcher{p.Dispatcher}, sec: p.Security, quotas: p.Quotas,
		acceptAfter: p.AcceptAfter, bufs: p.Bufs,
	}
	if p.Dispatcher != nil {
		d.frameArrival = p.Dispatcher.FrameArrival
	}
	return newServer(cfg, lns, d)
}

func newServer(cfg Config, lns []*listener.Bound, d deps) *Server {
	cfg.setDefaults()
	if d.bufs == nil {
		d.bufs = new(kwire.BufPool)
	}
	if d.trimTicks == nil {
		d.trimTicks = func(every time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(every)
			return t.C, t.Stop
		}
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registry, d.bufs), flex: kwire.NewFlexTable(), d: d, bufs: d.bufs,
		lns: lns, sec: d.sec, conns: make(map[*clientConn]struct{}),
	}
	s.g = newGuard(cfg.Limits, cfg.Logger, cfg.Registry)
	s.initProxied() // proxied.go
	s.connCtx, s.cancelConn = context.WithCancelCause(context.Background())
	return s
}

// Addr is the bound address of the first Kafka listener.
func (s *Server) Addr() string { return s.lns[0].Ln.Addr().String() }

// ListenerAddr is the bound address of the named listener ("" if none).
func (s *Server) ListenerAddr(name string) string {
	for _, b := range s.lns {
		if b.Name == name {
			return b.Ln.Addr().String()
		}
	}
	return ""
}

// Draining reports whether the server has begun shutting down.
func (s *Server) Draining() bool { return s.draining.Load() }

// Run serves until ctx ends, then stops accepting, lets outstanding requests
// finish within DrainTimeout, closes the connections and returns nil. It
// returns an error if accepting fails first (it shuts down the same way).
func (s *Server) Run(ctx context.Context) error {
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	var bgWG sync.WaitGroup
	errc := make(chan error, len(s.lns)) // one per accept loop
	bgWG.Go(func() { s.trimLoop(bg) })
	var acceptWG sync.WaitGroup
	for _, bl := range s.lns {
		acceptWG.Go(func() {
			if !s.acceptReady(ctx) {
				return
			}
			if err := s.acceptLoop(bl); err != nil {
				errc <- err
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
		s.log.Error("proxy failing", "err", runErr)
	}
	s.drain()
	acceptWG.Wait()
	stopBG()
	bgWG.Wait()
	return runErr
}

// acceptReady waits for Parts.AcceptAfter, if set.
func (s *Server) acceptReady(ctx context.Context) bool {
	if s.d.acceptAfter == nil {
		return true
	}
	select {
	case <-s.d.acceptAfter:
		return true
	case <-ctx.Done():
		return false
	}
}

// trimLoop gives back, every BufTrimInterval, the pooled frames that no
// request took during the interval (kwire.BufPool.Trim): after a burst of
// large frames the idle proxy does not keep their memory.
// returnMemoryBytes: a trim that drops at least this much also returns
// memory to the operating system (at most once per BufTrimInterval).
const returnMemoryBytes = 32 << 20

func (s *Server) trimLoop(ctx context.Context) {
	ticks, stop := s.d.trimTicks(s.cfg.BufTrimInterval)
	defer stop()
	for {
		select {
		case <-ticks:
			if n := s.bufs.Trim(); n > 0 {
				s.log.Debug("frame pool gave back unused frames", "bytes", n, "kept_bytes", s.bufs.FreeBytes())
				if n >= returnMemoryBytes {
					// A burst's frames are garbage now, but an idle proxy
					// allocates too little to trigger a collection soon,
					// and its RSS stays at the burst's peak until one
					// does: collect and give the pages back now.
					debug.FreeOSMemory()
				}
			}
		case <-ctx.Done():
			return
		}
	}
}

func (s *Server) acceptLoop(bl *listener.Bound) error {
	var backoff time.Duration
	for {
		nc, err := bl.Ln.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Running out of file descriptors is passing: wait, do not spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if bl.ProxyProtocol.On() {
			s.startProxied(nc, bl) // proxied.go: the header first
			continue
		}
		s.startConn(nc, bl)
	}
}

func (s *Server) startConn(nc net.Conn, bl *listener.Bound) {
	release, refused := s.g.admit(nc)
	if refused != "" {
		s.g.refuse(nc, refused)
		return
	}
	c := newClientConn(s, s.nextID.Add(1), nc, bl)
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		release()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.m.conns.Inc()
	s.m.connTotal.Inc()
	go func() {
		defer s.connWG.Done()
		defer release()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.m.conns.Dec()
	}()
}

// forceWait bounds the wait for connections after they were forced closed:
// only a dispatcher ignoring its context could hold them longer.
const forceWait = 5 * time.Second

// drain stops accepting, lets each connection finish what it has read, and
// force-closes whatever is left after DrainTimeout.
func (s *Server) drain() {
	s.mu.Lock()
	s.draining.Store(true)
	conns := make([]*clientConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	listener.Close(s.lns)
	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	timer := time.NewTimer(s.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-done:
		s.log.Info("client connections drained", "connections", len(conns))
		return
	case <-timer.C:
	}
	s.mu.Lock()
	left := len(s.conns)
	for c := range s.conns {
		c.close(errDraining)
	}
	s.mu.Unlock()
	s.log.Warn("drain timeout: closed client connections with requests outstanding", "connections", left, "timeout", s.cfg.DrainTimeout)
	s.cancelConn(errDraining)
	timer.Reset(forceWait)
	select {
	case <-done:
	case <-timer.C:
		s.log.Error("client connections still running after forced close", "wait", forceWait)
	}
}
