// Package devcluster runs a whole kproxy system in one process: a real
// embedded etcd, N stub brokers and M proxies, all on 127.0.0.1. It backs
// `kproxy dev` and the in-process integration tests. Each broker gets its own
// etcd client so that KillBroker can cut it off abruptly, the way a crashed
// process would: its leases then expire on the server after the TTL.
//
// It lives in assembly because it assembles the proxy and the stub
// broker: it sits above both in the import direction (neither may import
// it), and below only cmd/kproxy and the tests. internal/ keeps it out of
// the public API; assembly/ keeps it apart from the small libraries in
// internal/ that proxy and broker import.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
)

// Config describes the cluster. Zero values take the defaults in brackets.
type Config struct {
	Brokers           int           // [3]
	Proxies           int           // [1]
	ProxyListen       []string      // per proxy [127.0.0.1:0]
	AdminListen       []string      // per proxy [127.0.0.1:0]
	BrokerListen      []string      // per broker [127.0.0.1:0]
	LeaseTTL          time.Duration // [10s]
	DefaultPartitions int32         // [3]
	AutoCreateTopics  bool
	StoreMemory       bool         // keep segments in memory instead of DataDir/store
	DataDir           string       // [temporary, removed by Close]
	EtcdClientAddr    string       // [127.0.0.1:0]
	Authz             authz.Config // the proxies' authorization [allow-all]
	// Racks, if set, puts broker id in Racks[(id-1)%len] (its zone).
	Racks  []string
	Logger *slog.Logger
	// ProxyConfig, if set, adjusts proxy i's configuration before it starts
	// (listeners, security).
	ProxyConfig func(i int, cfg *assembly.Config)
	// BrokerVersions, if set, narrows every broker's ApiVersions table
	// (broker.Config.Versions).
	BrokerVersions []kmsg.ApiVersionsResponseApiKey
}

// Cluster is a running system.
type Cluster struct {
	cfg          Config
	logger       *slog.Logger
	etcd         *etcdlocal.Server
	EtcdEndpoint string
	cli          *clientv3.Client // the proxies' and the cluster's own client
	layout       layout.Layout
	store        store.ObjectStore

	mu      sync.Mutex
	brokers map[int32]*brokerProc
	listens map[int32]string // last address of each broker, for restarts
	proxies []*proxyProc
}

type brokerProc struct {
	b      *broker.Broker
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan error
	listen string
}

type proxyProc struct {
	s      *assembly.Proxy
	cancel context.CancelFunc
	done   chan error
}

// Start starts etcd, the brokers and the proxies, and waits until every proxy
// is ready to route.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	cfg = cfg.withDefaults()
	c := &Cluster{cfg: cfg, logger: cfg.Logger, layout: layout.New(""), brokers: map[int32]*brokerProc{}, listens: map[int32]string{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	etcdDir := ""
	if cfg.DataDir != "" {
		etcdDir = filepath.Join(cfg.DataDir, "etcd")
	}
	c.etcd, err = etcdlocal.Start(ctx, etcdlocal.Config{Dir: etcdDir, ClientAddr: cfg.EtcdClientAddr, UnsafeNoFsync: cfg.DataDir == ""})
	if err != nil {
		return nil, err
	}
	c.EtcdEndpoint = c.etcd.Endpoint
	if c.cli, err = c.newClient(); err != nil {
		return nil, err
	}
	if c.store, err = c.openStore(); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Brokers; i++ {
		if err := c.startBroker(ctx, int32(i+1), listenAt(cfg.BrokerListen, i)); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.Proxies; i++ {
		if err := c.startProxy(ctx, listenAt(cfg.ProxyListen, i), listenAt(cfg.AdminListen, i)); err != nil {
			return nil, err
		}
	}
	return c, c.waitReady(ctx)
}

func (c Config) withDefaults() Config {
	if c.Brokers == 0 {
		c.Brokers = 3
	}
	if c.Proxies == 0 {
		c.Proxies = 1
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.DefaultPartitions == 0 {
		c.DefaultPartitions = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func listenAt(addrs []string, i int) string {
	if i < len(addrs) && addrs[i] != "" {
		return addrs[i]
	}
	return "127.0.0.1:0"
}

func (c *Cluster) clientConfig() clientv3.Config {
	return clientv3.Config{Endpoints: []string{c.EtcdEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
}

func (c *Cluster) newClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(c.clientConfig())
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", c.EtcdEndpoint, err)
	}
	return cli, nil
}

func (c *Cluster) openStore() (store.ObjectStore, error) {
	if c.cfg.StoreMemory {
		return store.NewMemory(), nil
	}
	dir := c.cfg.DataDir
	if dir == "" {
		// The etcd server's temp dir is removed by Close; keep the store beside it.
		dir = filepath.Join(c.etcd.Dir, "store")
	} else {
		dir = filepath.Join(dir, "store")
	}
	s, err := store.NewFS(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return s, nil
}

// rackOf is broker id's rack ("" without Config.Racks).
func (c *Cluster) rackOf(id int32) string {
	if len(c.cfg.Racks) == 0 {
		return ""
	}
	return c.cfg.Racks[int(id-1)%len(c.cfg.Racks)]
}

func (c *Cluster) startBroker(ctx context.Context, id int32, listen string) error {
	cli, err := c.newClient()
	if err != nil {
		return err
	}
	ecfg := c.clientConfig()
	b, err := broker.New(ctx, broker.Config{
		ID: id, Listen: listen, Etcd: cli, EtcdConfig: &ecfg, Layout: c.layout, Store: c.store,
		LeaseTTL: c.cfg.LeaseTTL, AutoCreateTopics: c.cfg.AutoCreateTopics,
		DefaultPartitions: c.cfg.DefaultPartitions, Rack: c.rackOf(id),
		Logger: c.logger, Versions: c.cfg.BrokerVersions,
	})
	if err != nil {
		cli.Close()
		return fmt.Errorf("start broker %d: %w", id, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &brokerProc{b: b, cli: cli, cancel: cancel, done: make(chan error, 1), listen: b.Addr()}
	go func() { p.done <- b.Run(runCtx) }()
	c.mu.Lock()
	c.brokers[id] = p
	c.listens[id] = b.Addr()
	c.mu.Unlock()
	return nil
}

func (c *Cluster) startProxy(ctx context.Context, listen, admin string) error {
	reg := prometheus.NewRegistry()
	if len(c.proxies) == 0 { // the process's runtime and memory, once (khostile reads them)
		promreg.Register(reg, collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})))
		promreg.Register(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	pcfg := assembly.Config{
		Listen: listen, AdminListen: admin, Etcd: c.cli, Layout: c.layout,
		AutoCreateTopics: c.cfg.AutoCreateTopics, DefaultPartitions: c.cfg.DefaultPartitions,
		Authz:  c.cfg.Authz,
		Logger: c.logger.With("proxy", len(c.proxies)), Registry: reg,
	}
	if c.cfg.ProxyConfig != nil {
		c.cfg.ProxyConfig(len(c.proxies), &pcfg)
	}
	s, err := assembly.New(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("start proxy %d: %w", len(c.proxies), err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &proxyProc{s: s, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- s.Run(runCtx) }()
	c.mu.Lock()
	c.proxies = append(c.proxies, p)
	c.mu.Unlock()
	return nil
}

// waitReady waits until every proxy's watch has synced and sees every broker.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, addr := range c.AdminAddrs() {
		if err := adminapi.WaitReady(ctx, addr, c.cfg.Brokers); err != nil {
			return fmt.Errorf("proxy with admin %s not ready: %w", addr, err)
		}
	}
	return nil
}

// Proxy is proxy i, in start order.
func (c *Cluster) Proxy(i int) *assembly.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proxies[i].s
}

// ProxyAddrs are the proxies' client addresses, in start order.
func (c *Cluster) ProxyAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.proxies))
	for i, p := range c.proxies {
		out[i] = p.s.Addr()
	}
	return out
}

// AdminAddrs are the proxies' admin HTTP addresses, in start order.
func (c *Cluster) AdminAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.proxies))
	for i, p := range c.proxies {
		out[i] = p.s.AdminAddr()
	}
	return out
}

// BrokerIDs are the ids of the running brokers, ascending.
func (c *Cluster) BrokerIDs() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.brokers))
}

// BrokerAddr is a running broker's client address ("" if not running).
func (c *Cluster) BrokerAddr(id int32) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.brokers[id]; ok {
		return p.b.Addr()
	}
	return ""
}

// Client is an etcd client for the cluster's etcd, owned by the cluster.
func (c *Cluster) Client() *clientv3.Client { return c.cli }

// Owner reads a partition's owner key from etcd: the owning broker, and
// whether the partition is owned at all.
func (c *Cluster) Owner(ctx context.Context, topic string, partition int32) (int32, bool, error) {
	resp, err := c.cli.Get(ctx, c.layout.OwnerKey(topic, partition))
	if err != nil {
		return 0, false, fmt.Errorf("read owner of %s/%d: %w", topic, partition, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	b, err := layout.DecodeOwner(resp.Kvs[0].Value)
	if err != nil {
		return 0, false, fmt.Errorf("owner of %s/%d: %w", topic, partition, err)
	}
	return b, true, nil
}

// StrandPartition makes a partition's owner vanish and a broker that is
// not live take it, as when every session expired at once and another
// process grabbed keys it cannot serve: the owner key is deleted, then put
// again naming stranger under a lease of its own (TTL ttl, so a test that
// dies does not strand it for ever), with the epoch bumped as an acquisition
// bumps it. Produces to the partition are refused until release revokes
// that lease and the partition is free again.
func (c *Cluster) StrandPartition(ctx context.Context, topic string, partition, stranger int32, ttl time.Duration) (release func(context.Context) error, err error) {
	stray, err := c.cli.Grant(ctx, int64(max(ttl/time.Second, 1)))
	if err != nil {
		return nil, fmt.Errorf("strand %s/%d: grant a lease: %w", topic, partition, err)
	}
	revoke := func(ctx context.Context) error {
		if _, err := c.cli.Revoke(ctx, stray.ID); err != nil {
			return fmt.Errorf("release %s/%d: revoke the stray lease: %w", topic, partition, err)
		}
		return nil
	}
	// A delete first, so that the stray key has a create revision (the
	// fencing token) of its own, as a real acquisition would.
	if _, err := c.cli.Delete(ctx, c.layout.OwnerKey(topic, partition)); err != nil {
		return nil, errors.Join(fmt.Errorf("strand %s/%d: delete the owner key: %w", topic, partition, err), revoke(ctx))
	}
	if _, err := c.cli.Txn(ctx).Then(
		clientv3.OpPut(c.layout.OwnerKey(topic, partition), layout.Marshal(layout.Owner{Broker: stranger}), clientv3.WithLease(stray.ID)),
		clientv3.OpPut(c.layout.EpochKey(topic, partition), ""),
	).Commit(); err != nil {
		return nil, errors.Join(fmt.Errorf("strand %s/%d: put owner %d: %w", topic, partition, stranger, err), revoke(ctx))
	}
	return revoke, nil
}

// LeaseStats returns each running broker's lease session counters.
func (c *Cluster) LeaseStats() map[int32]lease.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]lease.Stats, len(c.brokers))
	for id, p := range c.brokers {
		out[id] = p.b.LeaseStats()
	}
	return out
}

// KillBroker stops a broker the way a crash would: it releases nothing, its
// etcd client is closed, and its leases run out on the server.
func (c *Cluster) KillBroker(id int32) error {
	p, err := c.takeBroker(id)
	if err != nil {
		return err
	}
	p.b.Crash() // closes p.cli: no keepalive and no revoke
	p.cancel()
	<-p.done
	return nil
}

// StopBroker stops a broker gracefully: it hands its partitions over at once.
func (c *Cluster) StopBroker(id int32) error {
	p, err := c.takeBroker(id)
	if err != nil {
		return err
	}
	p.cancel()
	runErr := <-p.done
	p.cli.Close()
	return runErr
}

// RestartBroker starts a stopped or killed broker again on its old address.
func (c *Cluster) RestartBroker(ctx context.Context, id int32) error {
	c.mu.Lock()
	listen, known := c.listens[id]
	_, running := c.brokers[id]
	c.mu.Unlock()
	if !known || running {
		return fmt.Errorf("restart broker %d: known=%v running=%v", id, known, running)
	}
	return c.startBroker(ctx, id, listen)
}

func (c *Cluster) takeBroker(id int32) (*brokerProc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.brokers[id]
	if !ok {
		return nil, fmt.Errorf("broker %d is not running", id)
	}
	delete(c.brokers, id)
	return p, nil
}

// Wait blocks until ctx ends or any component stops on its own, and returns
// that component's error.
func (c *Cluster) Wait(ctx context.Context) error {
	errs := make(chan error, 1)
	c.mu.Lock()
	for id, p := range c.brokers {
		go func() {
			select {
			case err := <-p.done:
				p.done <- err
				errs <- fmt.Errorf("broker %d stopped: %w", id, err)
			case <-ctx.Done():
			}
		}()
	}
	for i, p := range c.proxies {
		go func() {
			select {
			case err := <-p.done:
				p.done <- err
				errs <- fmt.Errorf("proxy %d stopped: %w", i, err)
			case <-ctx.Done():
			}
		}()
	}
	c.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// Close stops proxies, then brokers (gracefully), then etcd.
func (c *Cluster) Close() {
	c.mu.Lock()
	proxies, brokers := c.proxies, c.brokers
	c.proxies, c.brokers = nil, map[int32]*brokerProc{}
	c.mu.Unlock()
	var errs []error
	for _, p := range proxies {
		p.cancel()
		errs = append(errs, <-p.done)
	}
	for _, p := range brokers {
		p.cancel()
		errs = append(errs, <-p.done)
		p.cli.Close()
	}
	if err := errors.Join(errs...); err != nil {
		c.logger.Warn("cluster components stopped with errors", "err", err)
	}
	if c.cli != nil {
		c.cli.Close()
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
}
