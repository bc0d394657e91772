package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/layout"
)

// clusterConfig says what to run and where.
type clusterConfig struct {
	dir      string // logs and etcd data
	kproxy   string // binary
	kbench   string // binary
	brokers  int
	leaseTTL time.Duration
	pprof    bool
	// proxyFlags are extra `kproxy serve` flags (experiments).
	proxyFlags []string
	logger     *slog.Logger
}

// brokerProc is one stub broker process and the relay in front of it.
type brokerProc struct {
	id    int32
	addr  string // listen = advertise: the proxy and direct clients dial it
	relay string // the relay's address (relay side)
	proc  *Proc
}

// Cluster is etcd, the brokers, one relay process per broker and the proxy,
// each a separate process so that CPU and memory are per process.
type Cluster struct {
	cfg          clusterConfig
	layout       layout.Layout
	etcd         *Proc
	etcdEndpoint string
	etcdCli      *clientv3.Client
	brokers      []*brokerProc
	relays       []*Proc
	proxy        *Proc
	proxyAddr    string
	etcdDir      string
	// EtcdOnTmpfs says etcd's data is on tmpfs (see etcdDataDir).
	EtcdOnTmpfs bool
	adminAddr   string
}

// startCluster starts everything and waits until the proxy is ready with
// every broker live. On error it stops what it started.
func startCluster(ctx context.Context, cfg clusterConfig) (c *Cluster, err error) {
	c = &Cluster{cfg: cfg, layout: layout.New("")}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	etcdAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c.etcdDir, c.EtcdOnTmpfs = etcdDataDir(cfg.dir)
	c.etcd, err = startProc(cfg.dir, "etcd", false, cfg.kproxy, "etcd",
		"--listen-client", etcdAddr, "--data-dir", c.etcdDir)
	if err != nil {
		return nil, err
	}
	c.etcdEndpoint = "http://" + etcdAddr
	if c.etcdCli, err = waitEtcd(ctx, c.etcdEndpoint, c.etcd); err != nil {
		return nil, err
	}
	for i := range cfg.brokers {
		b := &brokerProc{id: int32(i + 1)}
		if b.addr, err = freeAddr(); err != nil {
			return nil, err
		}
		if b.relay, err = freeAddr(); err != nil {
			return nil, err
		}
		c.brokers = append(c.brokers, b)
	}
	if err := c.startBrokers(ctx, c.brokers); err != nil {
		return nil, err
	}
	for _, b := range c.brokers {
		if err := c.startRelay(ctx, b); err != nil {
			return nil, err
		}
	}
	if err := c.startProxy(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startBrokers(ctx context.Context, bs []*brokerProc) error {
	for _, b := range bs {
		args := []string{"broker", "--id", strconv.Itoa(int(b.id)), "--listen", b.addr, "--advertise", b.addr,
			"--etcd-endpoints", c.etcdEndpoint, "--store", "memory", "--lease-ttl", c.cfg.leaseTTL.String(),
			"--log-level", "warn"}
		p, err := startProc(c.cfg.dir, fmt.Sprintf("broker-%d", b.id), false, c.cfg.kproxy, args...)
		if err != nil {
			return err
		}
		b.proc = p
	}
	for _, b := range bs {
		if err := c.waitBroker(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startRelay(ctx context.Context, b *brokerProc) error {
	p, err := startProc(c.cfg.dir, fmt.Sprintf("relay-%d", b.id), true, c.cfg.kbench,
		"relay", "--pair", b.relay+"="+b.addr, "--exit-on-stdin-eof")
	if err != nil {
		return err
	}
	c.relays = append(c.relays, p)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.readLine(waitCtx); err != nil {
		return fmt.Errorf("relay for broker %d not ready: %w", b.id, err)
	}
	return nil
}

func (c *Cluster) startProxy(ctx context.Context) error {
	var err error
	if c.proxyAddr, err = freeAddr(); err != nil {
		return err
	}
	if c.adminAddr, err = freeAddr(); err != nil {
		return err
	}
	args := []string{"serve", "--listen", c.proxyAddr, "--admin", c.adminAddr, "--advertise", c.proxyAddr,
		"--etcd-endpoints", c.etcdEndpoint, "--log-level", "warn"}
	if c.cfg.pprof {
		args = append(args, "--pprof")
	}
	args = append(args, c.cfg.proxyFlags...)
	if c.proxy, err = startProc(c.cfg.dir, "proxy", false, c.cfg.kproxy, args...); err != nil {
		return err
	}
	return c.waitProxyReady(ctx)
}

// Close stops every process, the proxy first.
func (c *Cluster) Close() {
	var procs []*Proc
	if c.proxy != nil {
		procs = append(procs, c.proxy)
	}
	procs = append(procs, c.relays...)
	for _, b := range c.brokers {
		if b.proc != nil {
			procs = append(procs, b.proc)
		}
	}
	stopAll(procs, c.cfg.logger)
	if c.etcdCli != nil {
		c.etcdCli.Close()
	}
	if c.etcd != nil {
		stopAll([]*Proc{c.etcd}, c.cfg.logger)
	}
	if c.EtcdOnTmpfs {
		os.RemoveAll(c.etcdDir)
	}
}

// etcdDataDir puts etcd's data on tmpfs when the machine has one: broker
// commits wait for etcd's fsync, and a disk's fsync latency (which varies
// with whatever else the shared machine writes) would otherwise dominate
// every produce latency, on every side alike, and hide the proxy's share.
func etcdDataDir(workDir string) (dir string, tmpfs bool) {
	if d, err := os.MkdirTemp("/dev/shm", "kproxy-bench-etcd-"); err == nil {
		return d, true
	}
	return filepath.Join(workDir, "etcd-data"), false
}

func stopAll(procs []*Proc, logger *slog.Logger) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(15 * time.Second); err != nil {
				logger.Warn("stop", "proc", p.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// restartBrokers stops every broker gracefully (they release their
// partitions) and starts them again with empty memory stores, so that data
// from earlier scenarios does not pile up in memory.
func (c *Cluster) restartBrokers(ctx context.Context) error {
	var procs []*Proc
	for _, b := range c.brokers {
		procs = append(procs, b.proc)
	}
	stopAll(procs, c.cfg.logger)
	if err := c.startBrokers(ctx, c.brokers); err != nil {
		return err
	}
	return c.waitProxyReady(ctx)
}

// compactEtcd compacts etcd's history and defragments it, and returns the
// database size before. Brokers commit every append through etcd, and
// `kproxy etcd` does not compact by itself: without this, a run reaches
// etcd's 2 GiB quota and the brokers stop.
func (c *Cluster) compactEtcd(ctx context.Context) (int64, error) {
	st, err := c.etcdCli.Status(ctx, c.etcdEndpoint)
	if err != nil {
		return 0, fmt.Errorf("etcd status: %w", err)
	}
	if _, err := c.etcdCli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("etcd compact: %w", err)
	}
	if _, err := c.etcdCli.Defragment(ctx, c.etcdEndpoint); err != nil {
		return 0, fmt.Errorf("etcd defragment: %w", err)
	}
	return st.DbSize, nil
}

// killBroker kills broker id with SIGKILL: its leases expire on their own.
func (c *Cluster) killBroker(id int32) error {
	for _, b := range c.brokers {
		if b.id == id {
			b.proc.Kill()
			return nil
		}
	}
	return fmt.Errorf("no broker %d", id)
}

// restartBroker starts a killed broker again.
func (c *Cluster) restartBroker(ctx context.Context, id int32) error {
	for _, b := range c.brokers {
		if b.id == id {
			if err := c.startBrokers(ctx, []*brokerProc{b}); err != nil {
				return err
			}
			return c.waitProxyReady(ctx)
		}
	}
	return fmt.Errorf("no broker %d", id)
}

// side is one way for clients to reach the brokers.
type side struct {
	name   string
	target load.Target
}

const (
	sideDirect = "direct"
	sideProxy  = "kproxy"
	sideRelay  = "relay"
)

var sideNames = []string{sideDirect, sideProxy, sideRelay}

func (c *Cluster) side(name string) side {
	switch name {
	case sideProxy:
		return side{name, load.Target{Seeds: []string{c.proxyAddr}}}
	case sideRelay:
		t := load.Target{DialMap: make(map[string]string)}
		for _, b := range c.brokers {
			t.Seeds = append(t.Seeds, b.relay)
			t.DialMap[b.addr] = b.relay
		}
		return side{name, t}
	default:
		var t load.Target
		for _, b := range c.brokers {
			t.Seeds = append(t.Seeds, b.addr)
		}
		return side{sideDirect, t}
	}
}

// sideArgs are kbench's flags for reaching a side.
func (s side) args() []string {
	args := []string{"--seeds", strings.Join(s.target.Seeds, ",")}
	if len(s.target.DialMap) > 0 {
		var m []string
		for from, to := range s.target.DialMap {
			m = append(m, from+"="+to)
		}
		args = append(args, "--dial-map", strings.Join(m, ","))
	}
	return args
}

// owners reads the owner of every owned partition of topic from etcd.
func (c *Cluster) owners(ctx context.Context, topic string) (map[int32]int32, error) {
	resp, err := c.etcdCli.Get(ctx, c.layout.MetaPrefix()+"owners/"+topic+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read owners of %s: %w", topic, err)
	}
	owners := make(map[int32]int32)
	for _, kv := range resp.Kvs {
		k := c.layout.Parse(string(kv.Key))
		if k.Kind != layout.KindOwner || k.Topic != topic {
			continue
		}
		var o layout.Owner
		if err := layout.Unmarshal(kv.Value, &o); err != nil {
			return nil, fmt.Errorf("owner %s: %w", kv.Key, err)
		}
		owners[k.Partition] = o.Broker
	}
	return owners, nil
}

// procCPU is the CPU time of the proxy, the relays and the brokers.
type procCPU struct {
	proxy, relays, brokers time.Duration
	clients                time.Duration // the load generator
}

func (c *Cluster) cpu() (procCPU, error) {
	var s procCPU
	var err error
	if s.proxy, err = cpuTime(c.proxy.Pid()); err != nil {
		return s, err
	}
	for _, r := range c.relays {
		d, err := cpuTime(r.Pid())
		if err != nil {
			return s, err
		}
		s.relays += d
	}
	for _, b := range c.brokers {
		d, err := cpuTime(b.proc.Pid())
		if err != nil {
			return s, err
		}
		s.brokers += d
	}
	return s, nil
}

func (a procCPU) sub(b procCPU) procCPU {
	return procCPU{proxy: a.proxy - b.proxy, relays: a.relays - b.relays, brokers: a.brokers - b.brokers, clients: a.clients - b.clients}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// poll calls check every interval until it returns nil, ctx ends or the
// process p exits; the error says what was last wrong.
func poll(ctx context.Context, what string, p *Proc, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready within %s: %w", what, timeout, last)
		case <-p.Done():
			return fmt.Errorf("%s: process exited (%v): %s", what, p.Err(), p.tail())
		case <-time.After(min(50*time.Millisecond*time.Duration(attempt+1), 500*time.Millisecond)):
		}
	}
}

func waitEtcd(ctx context.Context, endpoint string, p *Proc) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	err = poll(ctx, "etcd", p, 60*time.Second, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err
	})
	if err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// waitBroker waits until the broker is registered in etcd and answers a
// Kafka request.
func (c *Cluster) waitBroker(ctx context.Context, b *brokerProc) error {
	return poll(ctx, fmt.Sprintf("broker %d", b.id), b.proc, 60*time.Second, func(ctx context.Context) error {
		resp, err := c.etcdCli.Get(ctx, c.layout.BrokerKey(b.id))
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return errors.New("not registered")
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	})
}

// readiness is the part of the proxy's /readyz answer the harness uses.
type readiness struct {
	Ready       bool  `json:"ready"`
	Revision    int64 `json:"revision"`
	LiveBrokers int   `json:"live_brokers"`
}

func (c *Cluster) readyz(ctx context.Context, hc *http.Client) (readiness, error) {
	var r readiness
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.adminAddr+"/readyz", nil)
	if err != nil {
		return r, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return r, fmt.Errorf("proxy /readyz: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("proxy /readyz: %w", err)
	}
	return r, nil
}

// waitProxyReady waits until the proxy is ready and sees every broker.
func (c *Cluster) waitProxyReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return poll(ctx, "proxy", c.proxy, 60*time.Second, func(ctx context.Context) error {
		r, err := c.readyz(ctx, hc)
		if err != nil {
			return err
		}
		if !r.Ready || r.LiveBrokers != len(c.brokers) {
			return fmt.Errorf("ready=%t live brokers %d of %d", r.Ready, r.LiveBrokers, len(c.brokers))
		}
		return nil
	})
}
