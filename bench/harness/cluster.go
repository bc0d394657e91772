package harness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/testkit/testrig"
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

// brokerProc is one stub broker process and the relays in front of it.
type brokerProc struct {
	*testrig.Broker
	relay     string // the splicing relay's address (relay side)
	copyRelay string // the user-space copying relay's address (relay-copy side)
}

// Cluster is etcd, the brokers, one relay process per broker and the proxy,
// each a separate process so that CPU and memory are per process.
type Cluster struct {
	cfg          clusterConfig
	layout       layout.Layout
	etcd         *testrig.Proc
	etcdEndpoint string
	etcdCli      *clientv3.Client
	rig          *testrig.Cluster // the brokers' and the proxy's processes
	brokers      []*brokerProc
	relays       []*testrig.Proc
	copyRelays   []*testrig.Proc // kbench relay --user-space-copy, one per broker
	proxy        *testrig.Proxy
	altProxy     *testrig.Proxy // the second proxy of the ACL and validation scenarios (nil: not running)
	etcdDir      string
	// EtcdOnTmpfs says etcd's data is on tmpfs (see etcdDataDir).
	EtcdOnTmpfs bool
	// loadCPUs are the CPUs of load generator runs (nil: any); see pin.
	loadCPUs []int
}

// startCluster starts everything and waits until the proxy is ready with
// every broker live. On error it stops what it started.
func startCluster(ctx context.Context, cfg clusterConfig) (*Cluster, error) {
	c := &Cluster{cfg: cfg, layout: layout.New("")}
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	cfg := c.cfg
	etcdAddr, err := testrig.FreeAddr()
	if err != nil {
		return err
	}
	c.etcdDir, c.EtcdOnTmpfs = etcdDataDir(cfg.dir)
	c.etcd = testrig.NewProc(testrig.Spec{Name: "etcd", Path: cfg.kproxy, LogPath: filepath.Join(cfg.dir, "etcd.log"),
		Args: []string{"etcd", "--listen-client", etcdAddr, "--data-dir", c.etcdDir}})
	if err := c.etcd.Start(ctx); err != nil {
		return err
	}
	c.etcdEndpoint = "http://" + etcdAddr
	if c.etcdCli, err = waitEtcd(ctx, c.etcdEndpoint, c.etcd); err != nil {
		return err
	}
	proxyArgs := cfg.proxyFlags
	if cfg.pprof {
		proxyArgs = append([]string{"--pprof"}, proxyArgs...)
	}
	c.rig, err = testrig.NewCluster(testrig.ClusterConfig{
		Kproxy: cfg.kproxy, LogDir: cfg.dir, Etcd: c.etcdCli, EtcdEndpoints: []string{c.etcdEndpoint},
		Store: "memory", LeaseTTL: cfg.leaseTTL, LogLevel: "warn", ProxyArgs: proxyArgs,
	})
	if err != nil {
		return err
	}
	for i := range cfg.brokers {
		b := &brokerProc{}
		if b.Broker, err = c.rig.AddBroker(int32(i+1), nil); err != nil {
			return err
		}
		if b.relay, err = testrig.FreeAddr(); err != nil {
			return err
		}
		if b.copyRelay, err = testrig.FreeAddr(); err != nil {
			return err
		}
		c.brokers = append(c.brokers, b)
	}
	if err := c.startBrokers(ctx, c.brokers); err != nil {
		return err
	}
	for _, b := range c.brokers {
		if err := c.startRelay(ctx, b, false); err != nil {
			return err
		}
		if err := c.startRelay(ctx, b, true); err != nil {
			return err
		}
	}
	if c.proxy, err = c.rig.AddProxy(); err != nil {
		return err
	}
	if err := c.rig.StartProxy(ctx, c.proxy, len(c.brokers)); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startBrokers(ctx context.Context, bs []*brokerProc) error {
	for _, b := range bs {
		if err := c.rig.StartBroker(ctx, b.Broker); err != nil {
			return err
		}
	}
	return nil
}

// startRelay starts b's splicing relay, or its user-space copying one.
func (c *Cluster) startRelay(ctx context.Context, b *brokerProc, userCopy bool) error {
	name, addr, flags := fmt.Sprintf("relay-%d", b.ID), b.relay, []string{}
	if userCopy {
		name, addr, flags = fmt.Sprintf("relay-copy-%d", b.ID), b.copyRelay, []string{"--user-space-copy"}
	}
	p := testrig.NewProc(testrig.Spec{Name: name, Path: c.cfg.kbench, CaptureStdout: true,
		LogPath: filepath.Join(c.cfg.dir, name+".log"),
		Args:    append([]string{"relay", "--pair", addr + "=" + b.Addr, "--exit-on-stdin-eof"}, flags...)})
	if err := p.Start(ctx); err != nil {
		return err
	}
	if userCopy {
		c.copyRelays = append(c.copyRelays, p)
	} else {
		c.relays = append(c.relays, p)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.ReadLine(waitCtx); err != nil {
		return fmt.Errorf("relay for broker %d not ready: %w", b.ID, err)
	}
	return nil
}

// Close stops every process, the proxy first.
func (c *Cluster) Close() {
	if c.proxy != nil {
		c.stopAll(c.proxy.Proc)
	}
	if c.altProxy != nil {
		c.stopAll(c.altProxy.Proc)
	}
	procs := append(append([]*testrig.Proc{}, c.relays...), c.copyRelays...)
	for _, b := range c.brokers {
		procs = append(procs, b.Proc)
	}
	c.stopAll(procs...)
	if c.etcdCli != nil {
		c.etcdCli.Close()
	}
	if c.etcd != nil {
		c.stopAll(c.etcd)
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

// stopAll stops procs in parallel and logs what did not stop cleanly.
func (c *Cluster) stopAll(procs ...*testrig.Proc) {
	if err := testrig.StopAll(15*time.Second, procs...); err != nil {
		c.cfg.logger.Warn("stop", "err", err)
	}
}

// restartBrokers stops every broker gracefully (they release their
// partitions) and starts them again with empty memory stores, so that data
// from earlier scenarios does not pile up in memory.
func (c *Cluster) restartBrokers(ctx context.Context) error {
	var procs []*testrig.Proc
	for _, b := range c.brokers {
		procs = append(procs, b.Proc)
	}
	c.stopAll(procs...)
	if err := c.startBrokers(ctx, c.brokers); err != nil {
		return err
	}
	return c.waitProxyReady(ctx)
}

// serialFlag makes a stub broker serve one request per connection at a
// time, as Kafka and KafScale do.
const serialFlag = "--serial-requests"

// setSerialBrokers restarts every broker with serialFlag, or without it.
func (c *Cluster) setSerialBrokers(ctx context.Context, on bool) error {
	for _, b := range c.brokers {
		args := slices.DeleteFunc(b.Proc.Args(), func(a string) bool { return a == serialFlag })
		if on {
			args = append(args, serialFlag)
		}
		b.Proc.SetArgs(args)
	}
	return c.restartBrokers(ctx)
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
		if b.ID == id {
			return b.Proc.Kill()
		}
	}
	return fmt.Errorf("no broker %d", id)
}

// restartBroker starts a killed broker again.
func (c *Cluster) restartBroker(ctx context.Context, id int32) error {
	for _, b := range c.brokers {
		if b.ID == id {
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
	// sideCopyRelay: relays that copy through user space (see
	// copyRelayScenarios), the floor of any intermediary that reads bytes.
	sideCopyRelay = "relay-copy"
)

var sideNames = []string{sideDirect, sideProxy, sideRelay}

func (c *Cluster) side(name string) side {
	switch name {
	case sideProxy:
		return side{name, load.Target{Seeds: []string{c.proxy.Addr}}}
	case sideACL, sideNoValidation, sideEncrypted:
		return side{name, load.Target{Seeds: []string{c.altProxy.Addr}}}
	case sideRelay, sideCopyRelay:
		t := load.Target{DialMap: make(map[string]string)}
		for _, b := range c.brokers {
			addr := b.relay
			if name == sideCopyRelay {
				addr = b.copyRelay
			}
			t.Seeds = append(t.Seeds, addr)
			t.DialMap[b.Addr] = addr
		}
		return side{name, t}
	default:
		var t load.Target
		for _, b := range c.brokers {
			t.Seeds = append(t.Seeds, b.Addr)
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
	return c.rig.Owners(ctx, topic)
}

// procCPU is the CPU time of the proxies, the relays and the brokers.
type procCPU struct {
	proxy, altProxy, relays, copyRelays, brokers time.Duration
	clients                                      time.Duration // the load generator
}

func (c *Cluster) cpu() (procCPU, error) {
	var s procCPU
	var err error
	if s.proxy, err = cpuTime(c.proxy.Proc.Pid()); err != nil {
		return s, err
	}
	if c.altProxy != nil {
		if s.altProxy, err = cpuTime(c.altProxy.Proc.Pid()); err != nil {
			return s, err
		}
	}
	for _, set := range []struct {
		procs []*testrig.Proc
		sum   *time.Duration
	}{{c.relays, &s.relays}, {c.copyRelays, &s.copyRelays}} {
		for _, r := range set.procs {
			d, err := cpuTime(r.Pid())
			if err != nil {
				return s, err
			}
			*set.sum += d
		}
	}
	for _, b := range c.brokers {
		d, err := cpuTime(b.Proc.Pid())
		if err != nil {
			return s, err
		}
		s.brokers += d
	}
	return s, nil
}

func (a procCPU) sub(b procCPU) procCPU {
	return procCPU{proxy: a.proxy - b.proxy, altProxy: a.altProxy - b.altProxy, relays: a.relays - b.relays,
		copyRelays: a.copyRelays - b.copyRelays, brokers: a.brokers - b.brokers, clients: a.clients - b.clients}
}

func waitEtcd(ctx context.Context, endpoint string, p *testrig.Proc) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	err = testrig.WaitFor(ctx, "etcd", p, 60*time.Second, func(ctx context.Context) error {
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

// waitProxyReady waits until the proxy is ready and sees every broker.
func (c *Cluster) waitProxyReady(ctx context.Context) error {
	return c.rig.WaitProxy(ctx, c.proxy, len(c.brokers))
}
