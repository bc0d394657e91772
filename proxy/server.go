// Package proxy is the client-facing server: it accepts Kafka client
// connections, reads size-prefixed frames, pipelines each connection's
// requests through the apis dispatcher, writes responses strictly in request
// order, stops reading from a connection that has too much outstanding
// (backpressure), and drains connections on shutdown. It also serves the
// admin HTTP API (health, readiness, metrics, routing table).
//
// A malformed, oversize or unknown request closes only the connection it
// came on, with a logged reason; other clients never wait for it.
//
// Clients come in on Kafka-style listeners (PLAINTEXT, SSL, SASL_PLAINTEXT,
// SASL_SSL; listener*.go): TLS and SASL end here, and each connection's
// listener and principal travel to the dispatcher in its context.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/proxy/aclstore"
	"github.com/kproxy/kproxy/proxy/adminui"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/authz"
	"github.com/kproxy/kproxy/proxy/quota"
	"github.com/kproxy/kproxy/proxy/tlsconf"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/routing"
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

// deps are the parts New wires; tests replace them. Every field is
// required: a test that needs no watch passes one that waits for its context.
type deps struct {
	disp   dispatcher
	routes *routing.Table
	status func() leasewatch.Status
	watch  func(ctx context.Context) error // keeps routes current until ctx ends
	prune  func()                          // drop connections to brokers that left
	close  func()                          // release upstream connections
	quotas *quota.Manager                  // nil: no client quotas
	// quotaRun keeps quotas current until ctx ends (nil: nothing to run).
	quotaRun func(ctx context.Context) error
	// acls, if set, keeps the authorizer's bindings current until ctx
	// ends; aclsSynced is closed once they are complete, and accepting
	// waits for it when enforce is set.
	acls       func(ctx context.Context) error
	aclsSynced <-chan struct{}
	enforce    bool
	// bufs is the proxy's one frame pool, shared with the layers wire
	// builds (nil: newServer makes one). trimTicks starts the ticker that
	// paces its Trim (nil: time.NewTicker); stop ends it.
	bufs      *kwire.BufPool
	trimTicks func(every time.Duration) (ticks <-chan time.Time, stop func())
}

// Server is a running proxy: create it with New, then call Run once.
type Server struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	flex kwire.FlexTable
	bufs *kwire.BufPool // client frames; the same pool as upstream's and apis's
	g    *guard
	d    deps

	lns        []*boundListener // Kafka listeners, in Config.Listeners order
	sec        *security        // authentication state shared by connections; nil: none
	adminLn    net.Listener
	adminCerts *tlsconf.Server // the admin endpoint's TLS files, when it serves TLS
	http       *http.Server
	ui         *adminui.UI // the routing page

	connCtx    context.Context // parent of every client connection's context
	cancelConn context.CancelCauseFunc
	nextID     atomic.Uint64
	mu         sync.Mutex
	conns      map[*clientConn]struct{}
	draining   atomic.Bool
	connWG     sync.WaitGroup
}

// New binds both listeners and wires the routing table, its etcd watch, the
// upstream broker pool and the request dispatcher. Nothing runs until Run.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("proxy: Config.Etcd is required")
	}
	cfg.setDefaults()
	if err := cfg.setListeners(); err != nil {
		return nil, err
	}
	lns, adminLn, err := listen(ctx, cfg)
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		closeListeners(lns)
		adminLn.Close()
	}
	sec, err := wireSecurity(cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	d, err := wire(cfg, lns[0].advertise(), sec.admin, new(kwire.BufPool))
	if err != nil {
		closeAll()
		return nil, err
	}
	s := newServer(cfg, lns, adminLn, d)
	s.sec = sec
	if err := s.secureAdmin(); err != nil {
		closeAll()
		d.close()
		return nil, err
	}
	return s, nil
}

func listen(ctx context.Context, cfg Config) ([]*boundListener, net.Listener, error) {
	lns, err := bindListeners(ctx, cfg.Listeners)
	if err != nil {
		return nil, nil, err
	}
	var lc net.ListenConfig
	adminLn, err := lc.Listen(ctx, "tcp", cfg.AdminListen)
	if err != nil {
		closeListeners(lns)
		return nil, nil, fmt.Errorf("listen for admin http on %q: %w", cfg.AdminListen, err)
	}
	return lns, adminLn, nil
}

// wire builds the production dependencies.
func wire(cfg Config, bound string, scram apis.SCRAMAdmin, bufs *kwire.BufPool) (deps, error) {
	advertise := bound // the first listener's: for requests without a listener
	host, portStr, err := net.SplitHostPort(advertise)
	if err != nil {
		return deps{}, fmt.Errorf("proxy: advertise address %q: %w", advertise, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return deps{}, fmt.Errorf("proxy: advertise address %q: bad port", advertise)
	}
	routes := routing.NewTable()
	w, err := newSource(cfg, routes)
	if err != nil {
		return deps{}, fmt.Errorf("proxy: routing watch: %w", err)
	}
	az := authz.New(cfg.Authz)
	rec, err := authz.NewRecorder(authz.RecorderConfig{
		APIs: apis.AuthorizedKeys(), Registerer: cfg.Registry, Logger: cfg.Logger.With("component", "authz"),
		Audit: authzAudit(cfg), AuditAllowsEvery: cfg.AuditAllowsEvery,
	})
	if err != nil {
		return deps{}, fmt.Errorf("proxy: authorizer: %w", err)
	}
	acls := aclstore.New(aclstore.Config{
		Client: cfg.Etcd, Layout: cfg.Layout, Authorizer: az,
		Logger: cfg.Logger.With("component", "aclstore"), OnBadValue: rec.BadBinding,
	})
	pool := upstream.NewPool(upstream.Config{
		Resolve: func(id int32) (string, bool) {
			b, ok := routes.Broker(id)
			return b.Addr, ok
		},
		ConnsPerBroker: cfg.UpstreamConnsPerBroker,
		TLS:            cfg.UpstreamTLS,
		SASL:           cfg.UpstreamSASL,
		Bufs:           bufs,
		Logger:         cfg.Logger.With("component", "upstream"),
		Registerer:     cfg.Registry,
	})
	qm, qs, err := newQuotas(cfg)
	if err != nil {
		return deps{}, err
	}
	disp, err := apis.New(apis.Config{
		Routes: routes, Sender: pool, Quotas: qs,
		NodeID: cfg.NodeID, AdvertisedHost: host, AdvertisedPort: int32(port), ClusterID: cfg.ClusterID,
		AutoCreateTopics: cfg.AutoCreateTopics, DefaultPartitions: cfg.DefaultPartitions, SCRAM: scram,
		Authorizer: az, AuthzRecorder: rec, ACLs: acls,
		Logger: cfg.Logger.With("component", "apis"), Registerer: cfg.Registry, Bufs: bufs,
		ProduceValidation: cfg.ProduceValidation, BadInput: newBadInput(cfg.Registry),
		BadInputLogInterval: cfg.Limits.BadInputLogInterval,
		// Each replica jitters its retries differently, or replicas retrying
		// the same failed broker would move in lockstep.
		Seed:  rand.Uint64(),
		Zones: zone.Resolver{Ranges: cfg.ZoneRanges, Own: cfg.Zone},
	})
	if err != nil {
		pool.Close()
		return deps{}, fmt.Errorf("proxy: dispatcher: %w", err)
	}
	return deps{
		disp: apisDispatcher{disp}, routes: routes, status: w.Status,
		watch: w.Run, prune: pool.Prune, quotas: qm, quotaRun: qs.Run,
		close: func() { pool.Close(); disp.Close() }, // failed by the pool, the long polls end
		acls:  acls.Run, aclsSynced: acls.Synced(), enforce: az.Enabled(), bufs: bufs,
	}, nil
}

func newServer(cfg Config, lns []*boundListener, adminLn net.Listener, d deps) *Server {
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
		lns: lns, adminLn: adminLn, conns: make(map[*clientConn]struct{}),
	}
	s.g = newGuard(cfg.Limits, cfg.Logger, cfg.Registry)
	s.connCtx, s.cancelConn = context.WithCancelCause(context.Background())
	s.ui = adminui.New(adminui.Config{
		Table: d.routes, Gatherer: cfg.Registry, State: s.readiness,
		Logger: cfg.Logger.With("component", "adminui"),
	})
	s.http = &http.Server{
		Handler:           s.adminMux(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.http.RegisterOnShutdown(s.ui.CloseStreams)
	return s
}

// Addr is the bound address of the first Kafka listener.
func (s *Server) Addr() string { return s.lns[0].ln.Addr().String() }

// AdminAddr is the bound admin HTTP address.
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// Run serves until ctx ends, then stops accepting, lets outstanding requests
// finish within DrainTimeout, closes everything and returns nil. It returns
// an error if a part of the server fails first (it shuts down the same way).
func (s *Server) Run(ctx context.Context) error {
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	var bgWG sync.WaitGroup
	errc := make(chan error, 6+len(s.lns)) // one per sender: routing, acl and quota watches, http, security, accept loops
	bgWG.Go(func() {
		if err := s.d.watch(bg); err != nil && bg.Err() == nil {
			errc <- fmt.Errorf("routing watch: %w", err)
		}
	})
	if s.d.acls != nil {
		bgWG.Go(func() {
			if err := s.d.acls(bg); err != nil && bg.Err() == nil {
				errc <- fmt.Errorf("acl watch: %w", err)
			}
		})
	}
	bgWG.Go(func() { s.pruneLoop(bg) })
	bgWG.Go(func() { s.trimLoop(bg) })
	bgWG.Go(func() { s.ui.Run(bg) })
	if s.d.quotaRun != nil {
		bgWG.Go(func() {
			if err := s.d.quotaRun(bg); err != nil && bg.Err() == nil {
				errc <- fmt.Errorf("quota watch: %w", err)
			}
		})
	}
	if s.adminCerts != nil {
		bgWG.Go(func() { _ = s.adminCerts.Run(bg) })
	}
	bgWG.Go(func() {
		if err := s.http.Serve(s.adminLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin http: %w", err)
		}
	})
	var acceptWG sync.WaitGroup
	for _, bl := range s.lns {
		acceptWG.Go(func() {
			if !s.aclsReady(ctx) {
				return
			}
			if err := s.acceptLoop(bl); err != nil {
				errc <- err
			}
		})
	}
	if s.sec != nil {
		bgWG.Go(func() {
			if err := s.sec.run(bg); err != nil && bg.Err() == nil {
				errc <- fmt.Errorf("security: %w", err)
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

	hctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.http.Shutdown(hctx); err != nil {
		s.http.Close()
	}
	stopBG()
	bgWG.Wait()
	s.d.close()
	return runErr
}

// aclsReady waits, when the authorizer enforces, until it holds the
// complete bindings: before that it would deny what they allow. Connections
// wait in the listen backlog meanwhile.
func (s *Server) aclsReady(ctx context.Context) bool {
	if !s.d.enforce || s.d.aclsSynced == nil {
		return true
	}
	select {
	case <-s.d.aclsSynced:
		return true
	case <-ctx.Done():
		return false
	}
}

// pruneLoop drops upstream connections to brokers that left the table.
func (s *Server) pruneLoop(ctx context.Context) {
	for {
		ch := s.d.routes.Changed()
		select {
		case <-ch:
			s.d.prune()
		case <-ctx.Done():
			return
		}
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

func (s *Server) acceptLoop(bl *boundListener) error {
	var backoff time.Duration
	for {
		nc, err := bl.ln.Accept()
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
		s.startConn(nc, bl)
	}
}

func (s *Server) startConn(nc net.Conn, bl *boundListener) {
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
	closeListeners(s.lns)
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
