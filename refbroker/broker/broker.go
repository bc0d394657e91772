// Package broker is kproxy's reference broker, for its tests and dev mode: it
// speaks the Kafka protocol (kmsg) well enough for real clients, keeps no
// local state that matters, and writes partitions only while it owns them
// through etcd leases, committing every append with a fenced transaction.
// Any broker serves committed data of any partition; acknowledged records
// are exactly the committed ones.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/group"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
	"github.com/kproxy/kproxy/refbroker/store"
)

// Failpoints are test hooks; nil funcs do nothing. They run on the
// partition's appender goroutine: blocking in one stalls that partition.
type Failpoints struct {
	// BeforeCommit runs after the segment object is written, before the
	// fenced commit.
	BeforeCommit func(topic string, partition int32)
	// AfterCommitBeforeAck runs after a successful commit, before any
	// producer is answered.
	AfterCommitBeforeAck func(topic string, partition int32)
}

// Config configures a Broker. Etcd and Store are required.
type Config struct {
	ID        int32
	Listen    string      // host:port to bind; "" means 127.0.0.1:0
	TLS       *tls.Config // if set, the listener serves TLS only
	Advertise string      // host:port in metadata; default the bound listen address
	// Rack is the broker's zone (Kafka's broker.rack): written to its
	// etcd record, where proxies read it to keep clients' reads in their
	// zone, and reported in Metadata.
	Rack string
	Etcd *clientv3.Client
	// EtcdConfig, when set, is what Etcd was built from: the lease session
	// keeps its lease alive on its own connection built from it, out of the
	// way of acquisitions and commits.
	EtcdConfig *clientv3.Config
	Layout     layout.Layout
	Store      store.ObjectStore
	LeaseTTL   time.Duration // default 10s

	AutoCreateTopics  bool
	DefaultPartitions int32 // default 3
	MaxFrameBytes     int32 // default 100 MiB
	// SerialRequests serves one request per connection at a time, in
	// order, and tells no client it may answer out of order, as Apache
	// Kafka does (serial.go).
	SerialRequests bool

	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: no metrics

	Failpoints *Failpoints
	// DisableFencing is a TEST ONLY mutation for the fault suite: commits
	// use a plain put without compares and trust the cached ownership, the
	// way broken systems lose and duplicate writes.
	DisableFencing bool
	// TrustProduce is a TEST ONLY mutation for the proxy's produce
	// validation: record data is stored as sent, framed by its length fields
	// without any check, the way a broker that does not validate (KafScale)
	// mis-stores what a client should never have sent.
	TrustProduce bool

	// SegmentCacheBytes bounds the cache of segment objects read for
	// fetches (default 256 MiB).
	SegmentCacheBytes int64
	// AcquiringMax bounds the lease acquisitions in flight, partitions and
	// group coordinators together (default 1024, see pacer.Config); AcquireWait is how long a
	// first request waits for a free slot before it is answered with a
	// retriable code (default 1s). See package pacer.
	AcquiringMax int
	AcquireWait  time.Duration
	// GCInterval is how often owned partitions' unreferenced objects are
	// collected (default 1m); GCGrace is how old an unreferenced object must
	// be (default 10m).
	GCInterval, GCGrace time.Duration

	// Versions, if set, narrows the ApiVersions table to another broker's
	// (tests of the proxy's version bridging use KafScale's): each listed
	// key is advertised and served only within its range, a range of -1/-1
	// not at all; unlisted keys keep the stub's own range.
	Versions []kmsg.ApiVersionsResponseApiKey
	served   map[kmsg.Key]versionRange // implemented, narrowed by Versions
}

func (c Config) withDefaults() (Config, error) {
	if c.Etcd == nil || c.Store == nil {
		return c, errors.New("broker: Config.Etcd and Config.Store are required")
	}
	c.served = narrowed(c.Versions)
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.Layout == (layout.Layout{}) {
		c.Layout = layout.New("")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 3
	}
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = 100 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Failpoints == nil {
		c.Failpoints = &Failpoints{}
	}
	if c.SegmentCacheBytes <= 0 {
		c.SegmentCacheBytes = 256 << 20
	}
	if c.GCInterval <= 0 {
		c.GCInterval = time.Minute
	}
	if c.GCGrace <= 0 {
		c.GCGrace = 10 * time.Minute
	}
	return c, nil
}

// Broker is one stub broker.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	ln      net.Listener
	addr    string
	sess    *lease.Session
	objs    store.ObjectStore // cached
	meta    *metaView
	view    *partlog.View
	logs    *partlog.Logs
	groups  *group.Coordinator
	pids    *pidAllocator
	pacer   *pacer.Pacer // shared by logs and groups
	metrics *metrics

	runCtx    context.Context // parent of every connection
	runCancel context.CancelFunc
	crashCh   chan struct{}
	crashOnce sync.Once
	running   atomic.Bool
	runDone   chan struct{}

	connsMu sync.Mutex
	conns   map[*conn]struct{}
	connsWG sync.WaitGroup
}

// New binds the listener, starts the lease session and registers the
// broker. Run serves.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("broker", cfg.ID)
	if cfg.DisableFencing {
		log.Error("FENCING DISABLED: commits are plain puts; this broker WILL lose and duplicate writes under faults (test mutation only)")
	}
	if cfg.TrustProduce {
		log.Error("PRODUCE VALIDATION DISABLED: record data is stored as sent; malformed data WILL make partitions unreadable (test mutation only)")
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("broker %d: listen %s: %w", cfg.ID, cfg.Listen, err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	addr := cfg.Advertise
	if addr == "" {
		addr = ln.Addr().String()
	}
	sess, err := lease.NewSession(ctx, lease.Config{
		Client: cfg.Etcd, EtcdConfig: cfg.EtcdConfig, Layout: cfg.Layout, BrokerID: cfg.ID, TTL: cfg.LeaseTTL,
		Logger: cfg.Logger, // adds "broker" itself
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("broker %d: %w", cfg.ID, err)
	}
	info := layout.BrokerInfo{ID: cfg.ID, Addr: addr, Rack: cfg.Rack, Started: time.Now().UTC()}
	if err := sess.Register(ctx, cfg.Layout.BrokerKey(cfg.ID), layout.Marshal(info)); err != nil {
		sess.Close()
		ln.Close()
		return nil, fmt.Errorf("broker %d: %w", cfg.ID, err)
	}
	m := newMetrics(cfg.Registerer)
	b := &Broker{
		cfg: cfg, log: log, ln: ln, addr: addr, sess: sess,
		objs:    store.NewCached(cfg.Store, cfg.SegmentCacheBytes, m),
		meta:    newMetaView(cfg.Layout, log),
		view:    partlog.NewView(cfg.Layout, log),
		metrics: m,
		crashCh: make(chan struct{}),
		runDone: make(chan struct{}),
		conns:   make(map[*conn]struct{}),
	}
	b.pids = newPIDAllocator(cfg.Etcd, cfg.Layout)
	b.pacer = pacer.New(pacer.Config{Max: cfg.AcquiringMax, Wait: cfg.AcquireWait, Refused: b.metrics.acquireRefused})
	b.logs = partlog.NewLogs(partlog.Config{
		Session: sess, Etcd: cfg.Etcd, Layout: cfg.Layout, Store: b.objs, View: b.view,
		Hooks: partlog.Hooks{
			BeforeCommit:         cfg.Failpoints.BeforeCommit,
			AfterCommitBeforeAck: cfg.Failpoints.AfterCommitBeforeAck,
		},
		Obs: b.metrics, DisableFencing: cfg.DisableFencing, Logger: log, Pacer: b.pacer,
	})
	b.groups = group.NewCoordinator(group.Config{
		Session: sess, Layout: cfg.Layout, Logger: log, Topics: b.topicResolver(), Pacer: b.pacer,
	})
	b.runCtx, b.runCancel = context.WithCancel(context.Background())
	return b, nil
}

// Addr is the address the broker advertises.
func (b *Broker) Addr() string { return b.addr }

// ID is the broker id.
func (b *Broker) ID() int32 { return b.cfg.ID }

// Run serves until ctx ends, then shuts down gracefully: it stops accepting,
// fails queued appends, releases every partition and group so successors
// take over at once, closes connections and revokes the lease.
func (b *Broker) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("broker: Run called twice")
	}
	defer close(b.runDone)
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	b.startBackground(bg, &bgWG)
	select {
	case <-b.meta.ready:
	case <-ctx.Done():
	case <-b.crashCh:
	}
	select {
	case <-b.view.Ready():
	case <-ctx.Done():
	case <-b.crashCh:
	}
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		b.accept()
	}()
	crashed := false
	select {
	case <-ctx.Done():
	case <-b.crashCh:
		crashed = true
	}
	b.ln.Close()
	<-acceptDone
	if crashed {
		b.crash(stopBG, &bgWG)
		return nil
	}
	b.shutdown(stopBG, &bgWG)
	return nil
}

func (b *Broker) startBackground(ctx context.Context, wg *sync.WaitGroup) {
	run := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	run(func() {
		etcdmirror.Sync(ctx, etcdmirror.SyncConfig{Client: b.cfg.Etcd, Prefix: b.cfg.Layout.MetaPrefix(), Handler: b.meta, Logger: b.log})
	})
	run(func() {
		etcdmirror.Sync(ctx, etcdmirror.SyncConfig{Client: b.cfg.Etcd, Prefix: schema.New(b.cfg.Layout).LogPrefix(), Handler: b.view, Logger: b.log})
	})
	run(func() { b.handleLosses(ctx) })
	run(func() { b.collectGarbage(ctx) })
}

// shutdown is the graceful path of Run.
func (b *Broker) shutdown(stopBG context.CancelFunc, bgWG *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.logs.Close(ctx)
	b.groups.Close()
	if err := b.sess.ReleaseAll(ctx); err != nil {
		b.log.Warn("release on shutdown", "err", err)
	}
	b.closeConns()
	stopBG()
	bgWG.Wait()
	b.sess.Close()
	b.log.Info("broker stopped")
}

// crash stops without giving anything back: owner keys stay until the lease
// expires on the server.
func (b *Broker) crash(stopBG context.CancelFunc, bgWG *sync.WaitGroup) {
	b.closeConns()
	b.cfg.Etcd.Close() // no revoke: the lease must expire
	b.sess.Abandon()   // and no keepalive on the session's own connection
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.logs.Close(ctx)
	b.groups.Close()
	stopBG()
	bgWG.Wait()
	b.log.Warn("broker crashed (test hook): ownerships left to expire")
}

// Crash is a test hook: it stops the broker as if its process died. It
// CLOSES Config.Etcd so the session stops keeping its lease alive and
// cannot revoke it; owner keys vanish only when the lease expires. Run
// returns; Crash waits for that when Run is running.
func (b *Broker) Crash() {
	b.crashOnce.Do(func() { close(b.crashCh) })
	if !b.running.Load() { // never served: just drop everything
		b.ln.Close()
		b.cfg.Etcd.Close()
		b.sess.Close()
		return
	}
	select {
	case <-b.runDone:
	case <-time.After(30 * time.Second):
		b.log.Error("crash: Run did not return within 30s")
	}
}

func (b *Broker) accept() {
	backoff := 5 * time.Millisecond
	for {
		nc, err := b.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // e.g. out of file descriptors: keep serving
			b.log.Warn("accept", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-b.runCtx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c := newConn(b, nc)
		b.connsMu.Lock()
		b.conns[c] = struct{}{}
		b.connsWG.Add(1)
		b.connsMu.Unlock()
		go func() {
			defer b.connsWG.Done()
			c.serve()
			b.connsMu.Lock()
			delete(b.conns, c)
			b.connsMu.Unlock()
		}()
	}
}

func (b *Broker) closeConns() {
	b.runCancel()
	b.connsMu.Lock()
	for c := range b.conns {
		c.nc.Close()
	}
	b.connsMu.Unlock()
	b.connsWG.Wait()
}

// handleLosses drops what a lost partition or group held. A session expiry
// arrives as one Loss naming every resource; none is ever dropped.
func (b *Broker) handleLosses(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-b.sess.LossReady():
			if !ok {
				return
			}
		}
		for _, l := range b.sess.TakeLosses() {
			b.metrics.loss(l.Session, len(l.Resources))
			for _, r := range l.Resources {
				b.dropResource(r, l.Reason)
			}
		}
	}
}

func (b *Broker) dropResource(r lease.Resource, reason error) {
	k := b.cfg.Layout.Parse(r.OwnerKey)
	switch k.Kind {
	case layout.KindOwner:
		b.logs.Drop(partlog.TP{Topic: k.Topic, Partition: k.Partition}, reason)
	case layout.KindCoordinator:
		b.groups.Drop(k.Group, reason)
	default:
		b.log.Warn("loss of unknown resource", "key", r.OwnerKey)
	}
}

// LeaseStats are the broker's lease session counters (session losses,
// ownerships lost, batched transactions).
func (b *Broker) LeaseStats() lease.Stats { return b.sess.Stats() }

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }
