// Package assembly wires a whole proxy: it binds the Kafka listeners and
// the admin listener, builds the routing table and its etcd feeder, the
// authorizer and its bindings, the SCRAM credential view, client quotas,
// the upstream broker pool and the request dispatcher, and runs them with
// the client-connection server (package proxy) and the admin endpoint
// (package admin).
//
// Its limit: it decides what is built and in which order it starts and
// stops; the behaviour of each part is that part's package's.
package assembly

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"net"
	"sync"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/admin"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/apis/local"
	"github.com/kproxy/kproxy/proxy/crypt"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/quota"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/routing"
)

// Proxy is a wired proxy: create it with New, then call Run once.
type Proxy struct {
	srv   *proxy.Server
	admin *admin.Endpoint
	log   *slog.Logger
	// bg is the background work Run runs beside the server, each until its
	// context ends (routing, acl and quota watches, security, the admin
	// endpoint); named for its error.
	bg     []runner
	routes *routing.Table
	creds  *credstore.Store
	acls   *aclstore.Store
	prune  func() // drop connections to brokers that left
	close  func() // release upstream connections
}

type runner struct {
	name string
	run  func(ctx context.Context) error
}

// New binds the Kafka and admin listeners and wires the routing table, its
// etcd watch, the upstream broker pool and the request dispatcher. Nothing
// runs until Run.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("proxy: Config.Etcd is required")
	}
	cfg.setDefaults()
	if err := cfg.setListeners(); err != nil {
		return nil, err
	}
	lns, err := listener.Bind(ctx, cfg.Listeners)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	adminLn, err := lc.Listen(ctx, "tcp", cfg.AdminListen)
	if err != nil {
		listener.Close(lns)
		return nil, fmt.Errorf("listen for admin http on %q: %w", cfg.AdminListen, err)
	}
	enc, err := newEncryption(ctx, cfg) // encryption.go
	if err != nil {
		listener.Close(lns)
		adminLn.Close()
		return nil, err
	}
	p, err := wire(cfg, lns, adminLn, enc)
	if err != nil {
		listener.Close(lns)
		adminLn.Close()
		return nil, err
	}
	return p, nil
}

// wire builds the production parts on bound listeners.
func wire(cfg Config, lns []*listener.Bound, adminLn net.Listener, enc *crypt.Service) (*Proxy, error) {
	// Every replica keeps a view of the SCRAM credentials in etcd: SASL
	// checks them and the Kafka API manages them.
	store := credstore.New(cfg.Etcd, cfg.Layout, cfg.Logger.With("component", "credstore"))
	sec, err := listener.New(cfg.Security, cfg.Listeners, store, cfg.Registry, cfg.Logger)
	if err != nil {
		return nil, err
	}
	bufs := new(kwire.BufPool)
	advertise := lns[0] // the first listener's: for requests without a listener
	routes := routing.NewTable()
	w, err := newSource(cfg, routes)
	if err != nil {
		return nil, fmt.Errorf("proxy: routing watch: %w", err)
	}
	az, rec, acls, err := newAuthorizer(cfg)
	if err != nil {
		return nil, err
	}
	qm, qs, err := newQuotas(cfg)
	if err != nil {
		return nil, err
	}
	pool := newPool(cfg, routes, bufs)
	disp, err := newDispatcher(cfg, dispatcherParts{
		routes: routes, pool: pool, quotas: qs, store: store, az: az, rec: rec, acls: acls, bufs: bufs, advertise: advertise, enc: enc,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("proxy: dispatcher: %w", err)
	}
	parts := proxy.Parts{Dispatcher: disp, Security: sec, Quotas: qm, Bufs: bufs}
	if az.Enabled() {
		parts.AcceptAfter = acls.Synced()
	}
	srv := proxy.NewServer(cfg.Server, lns, parts)
	closeUp := func() { pool.Close(); disp.Close() } // failed by the pool, the long polls end
	ep, err := admin.New(admin.Config{
		Routes: routes, Status: w.Status, Draining: srv.Draining, Registry: cfg.Registry, Zone: cfg.Zone,
		EnablePprof: cfg.EnablePprof, Security: cfg.Admin, Logger: cfg.Logger,
	}, adminLn)
	if err != nil {
		closeUp()
		return nil, err
	}
	p := &Proxy{
		srv: srv, admin: ep, log: cfg.Logger, routes: routes, creds: store, acls: acls, prune: pool.Prune, close: closeUp,
		bg: []runner{
			{"routing watch", w.Run}, {"acl watch", acls.Run}, {"quota watch", qs.Run},
			{"security", sec.Run}, {"", ep.Run},
		},
	}
	if enc != nil {
		p.bg = append(p.bg, runner{"encryption config", enc.Run})
	}
	return p, nil
}

// newAuthorizer is Kafka's ACL authorizer with its decision metrics and
// the bindings it enforces, kept from etcd.
func newAuthorizer(cfg Config) (*authz.Authorizer, *authz.Recorder, *aclstore.Store, error) {
	az := authz.New(cfg.Authz)
	rec, err := authz.NewRecorder(authz.RecorderConfig{
		APIs: apis.AuthorizedKeys(), Registerer: cfg.Registry, Logger: cfg.Logger.With("component", "authz"),
		Audit: authzAudit(cfg), AuditAllowsEvery: cfg.AuditAllowsEvery,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("proxy: authorizer: %w", err)
	}
	acls := aclstore.New(aclstore.Config{
		Client: cfg.Etcd, Layout: cfg.Layout, Authorizer: az,
		Logger: cfg.Logger.With("component", "aclstore"), OnBadValue: rec.BadBinding,
	})
	return az, rec, acls, nil
}

// Addr is the bound address of the first Kafka listener.
func (p *Proxy) Addr() string { return p.srv.Addr() }

// ListenerAddr is the bound address of the named listener ("" if none).
func (p *Proxy) ListenerAddr(name string) string { return p.srv.ListenerAddr(name) }

// AdminAddr is the bound admin HTTP address.
func (p *Proxy) AdminAddr() string { return p.admin.Addr() }

// WaitSecurity waits until this replica authenticates with every
// credential written up to credRev and authorizes with every binding
// written up to aclRev, or ctx ends: whoever just wrote them (dev) tells
// clients to use them only once they hold.
func (p *Proxy) WaitSecurity(ctx context.Context, credRev, aclRev int64) error {
	if err := p.creds.WaitRevision(ctx, credRev); err != nil {
		return fmt.Errorf("proxy: credentials: %w", err)
	}
	if err := p.acls.WaitRevision(ctx, aclRev); err != nil {
		return fmt.Errorf("proxy: acls: %w", err)
	}
	return nil
}

// Run serves until ctx ends, then stops accepting, lets outstanding requests
// finish within the drain timeout, stops the admin endpoint and the
// watches, closes the upstream connections and returns nil. It returns an
// error if a part of the proxy fails first (it shuts down the same way).
func (p *Proxy) Run(ctx context.Context) error {
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	var bgWG sync.WaitGroup
	errc := make(chan error, len(p.bg)+1)
	for _, r := range p.bg {
		bgWG.Go(func() {
			if err := r.run(bg); err != nil && bg.Err() == nil {
				if r.name != "" {
					err = fmt.Errorf("%s: %w", r.name, err)
				}
				errc <- err
			}
		})
	}
	bgWG.Go(func() { p.pruneLoop(bg) })

	// The server drains when ctx ends or a part fails; the admin endpoint
	// keeps answering (draining) meanwhile.
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	srvDone := make(chan error, 1)
	go func() { srvDone <- p.srv.Run(srvCtx) }()
	var runErr error
	select {
	case runErr = <-srvDone:
		srvDone = nil
	case runErr = <-errc:
		p.log.Error("proxy failing", "err", runErr)
		stopSrv()
	}
	if srvDone != nil {
		<-srvDone
	}
	stopBG()
	bgWG.Wait()
	p.close()
	return runErr
}

// pruneLoop drops upstream connections to brokers that left the table.
func (p *Proxy) pruneLoop(ctx context.Context) {
	for {
		ch := p.routes.Changed()
		select {
		case <-ch:
			p.prune()
		case <-ctx.Done():
			return
		}
	}
}

// newQuotas builds this replica's client quota manager and its etcd store,
// registered under a fresh replica id.
func newQuotas(cfg Config) (*quota.Manager, *quota.Store, error) {
	qc := cfg.Quota
	qc.Registerer = cfg.Registry
	m, err := quota.New(qc)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: quotas: %w", err)
	}
	var id [8]byte
	rand.Read(id[:]) // never fails (Go 1.24+)
	s, err := quota.NewStore(quota.StoreConfig{
		Client: cfg.Etcd, Layout: cfg.Layout, Manager: m, ID: hex.EncodeToString(id[:]),
		Logger: cfg.Logger.With("component", "quota"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("proxy: quotas: %w", err)
	}
	return m, s, nil
}

// authzAudit sends authorization decisions to cfg.Audit, or else to the
// security audit log.
func authzAudit(cfg Config) func(authz.Event) {
	if cfg.Audit != nil || cfg.Security.Audit == nil {
		return cfg.Audit
	}
	l := cfg.Security.Audit
	return func(e authz.Event) {
		l.Write(audit.Event{
			Event: audit.Authorization, Listener: e.Listener, Client: e.Client, Principal: e.Principal,
			Reason: e.Reason, API: e.API, ResourceType: e.ResourceType, Resource: e.Resource,
			Operation: e.Operation, Decision: e.Decision, Binding: e.Binding,
		})
	}
}

// newPool is the upstream connection pool, resolving broker ids through routes.
func newPool(cfg Config, routes *routing.Table, bufs *kwire.BufPool) *upstream.Pool {
	return upstream.NewPool(upstream.Config{
		Resolve: func(id int32) (string, bool) {
			b, ok := routes.Broker(id)
			return b.Addr, ok
		},
		ConnsPerBroker:    cfg.UpstreamConnsPerBroker,
		MaxConnsPerBroker: cfg.UpstreamMaxConns,
		IdleTimeout:       cfg.UpstreamIdleTimeout,
		TLS:               cfg.UpstreamTLS,
		SASL:              cfg.UpstreamSASL,
		Bufs:              bufs,
		Logger:            cfg.Logger.With("component", "upstream"),
		Registerer:        cfg.Registry,
	})
}

// dispatcherParts are what wire built before the dispatcher that uses them.
type dispatcherParts struct {
	routes    *routing.Table
	pool      *upstream.Pool
	quotas    *quota.Store
	store     *credstore.Store
	az        *authz.Authorizer
	rec       *authz.Recorder
	acls      *aclstore.Store
	bufs      *kwire.BufPool
	advertise *listener.Bound
	enc       *crypt.Service
}

// newDispatcher is the per-API dispatcher over the parts wire built.
func newDispatcher(cfg Config, p dispatcherParts) (*apis.Dispatcher, error) {
	return apis.New(apis.Config{
		Routes: p.routes, Sender: p.pool, Quotas: p.quotas,
		NodeID: cfg.NodeID, AdvertisedHost: p.advertise.Host, AdvertisedPort: p.advertise.Port, ClusterID: cfg.ClusterID,
		AutoCreateTopics: cfg.AutoCreateTopics, DefaultPartitions: cfg.DefaultPartitions,
		SCRAM:      local.NewUsers(local.UsersConfig{Store: p.store, Etcd: cfg.Etcd, Layout: cfg.Layout, MayManage: cfg.Security.MayManageUsers, Conn: apis.ConnIdentity, Audit: cfg.Security.Audit}),
		Authorizer: p.az, AuthzRecorder: p.rec, ACLs: p.acls,
		Logger: cfg.Logger.With("component", "apis"), Registerer: cfg.Registry, Bufs: p.bufs,
		ProduceValidation: cfg.ProduceValidation, MaxBatchBytes: int(cfg.Server.MaxFrameBytes), BadInput: proxy.NewBadInput(cfg.Registry),
		BadInputLogInterval: cfg.Server.Limits.BadInputLogInterval, Encryption: p.enc,
		// Each replica jitters its retries differently, or replicas retrying
		// the same failed broker would move in lockstep.
		Seed:  randv2.Uint64(),
		Zones: zone.Resolver{Ranges: cfg.ZoneRanges, Own: cfg.Zone},
		// KafScale's brokers wait MaxWait for each drained partition.
		PerPartitionFetchWait: cfg.EtcdLayout == LayoutKafScale,
		// and upload each partition of a Produce before the next.
		PerPartitionProduce: cfg.EtcdLayout == LayoutKafScale,
	})
}
