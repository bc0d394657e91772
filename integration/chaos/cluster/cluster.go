// Package cluster runs the system under fault test as separate processes on
// 127.0.0.1: etcd members (chaos/cmd/etcdmember), `kproxy broker` processes
// sharing one store folder, and `kproxy serve` replicas. Every broker reaches
// etcd only through its own fault relays (testkit/faultnet), one per etcd
// member, so one broker's etcd traffic can be cut or delayed alone.
//
// The promise: every process and relay Start created is ended by Close, also
// after a failed Start; restarts reuse each process's ports and data, so the
// cluster keeps one shape for the whole run.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/testkit/faultnet"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Config describes the cluster. Zero values take the defaults in brackets.
type Config struct {
	Dir        string // data and logs (required)
	Kproxy     string // path of the kproxy binary, built with testrig.UnsafeTag (required)
	EtcdMember string // path of the etcdmember binary (required)

	EtcdMembers int           // [3]
	Brokers     int           // [3]
	Proxies     int           // [2]
	LeaseTTL    time.Duration // [3s]
	Partitions  int32         // default partitions of auto-created topics [8]
	// DisableFencing starts every broker with --unsafe-disable-fencing
	// (which only a kproxy built with testrig.UnsafeTag has).
	DisableFencing bool
	// BrokerArgs and BrokerEnv are added to every broker's command line and
	// environment (failpoints, log level).
	BrokerArgs []string
	BrokerEnv  []string
	// Zones, if set, puts broker i (from 0) in Zones[i%len] (--rack) and
	// proxy j in Zones[j%len] (--zone): the fault suite's zone mode.
	Zones []string
	// EtcdNoFsync trades etcd durability under kill -9 for speed.
	EtcdNoFsync bool
	Logger      *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" || c.Kproxy == "" || c.EtcdMember == "" {
		return c, errors.New("cluster config: Dir, Kproxy and EtcdMember are required")
	}
	if c.EtcdMembers == 0 {
		c.EtcdMembers = 3
	}
	if c.Brokers == 0 {
		c.Brokers = 3
	}
	if c.Proxies == 0 {
		c.Proxies = 2
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 3 * time.Second
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Member is one etcd member.
type Member struct {
	Name       string
	ClientAddr string
	PeerAddr   string
	Proc       *testrig.Proc
}

// Broker is one `kproxy broker`.
type Broker struct {
	*testrig.Broker
	// Relays are the broker's only way to etcd, one per member, in member order.
	Relays []*faultnet.Relay
}

// Proxy is one `kproxy serve`.
type Proxy = testrig.Proxy

// Cluster is a running system under test.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	layout  layout.Layout
	Members []*Member
	Brokers []*Broker
	Proxies []*Proxy
	cli     *clientv3.Client
	rig     *testrig.Cluster // the brokers' and proxies' processes

	closeOnce sync.Once
}

// Start starts etcd, the brokers and the proxies and waits until every proxy
// routes to every broker.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, layout: layout.New("")}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, d := range []string{"logs", "store"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("make %s dir: %w", d, err)
		}
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startBrokers(ctx); err != nil {
		return nil, err
	}
	if err := c.startProxies(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) logPath(name string) string {
	return filepath.Join(c.cfg.Dir, "logs", name+".log")
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	var initial []string
	for i := range c.cfg.EtcdMembers {
		m := &Member{Name: fmt.Sprintf("etcd-%d", i+1)}
		addrs, err := testrig.FreeAddrs(2)
		if err != nil {
			return err
		}
		m.ClientAddr, m.PeerAddr = addrs[0], addrs[1]
		initial = append(initial, m.Name+"=http://"+m.PeerAddr)
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		args := []string{
			"-name", m.Name, "-data-dir", filepath.Join(c.cfg.Dir, m.Name),
			"-client", m.ClientAddr, "-peer", m.PeerAddr,
			"-initial-cluster", strings.Join(initial, ","), "-log-level", "warn",
		}
		if c.cfg.EtcdNoFsync {
			args = append(args, "-unsafe-no-fsync")
		}
		m.Proc = testrig.NewProc(testrig.Spec{Name: m.Name, Path: c.cfg.EtcdMember, Args: args,
			LogPath: c.logPath(m.Name), Ready: "etcdmember " + m.Name + " ready"})
	}
	// A member is ready only once a quorum formed: start all, then wait.
	errs := make(chan error, len(c.Members))
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, m := range c.Members {
		go func() { errs <- m.Proc.Start(startCtx) }()
	}
	var all []error
	for range c.Members {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.EtcdEndpoints(), DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zap.NewNop(), // its retry warnings during faults are expected noise
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	c.cli = cli
	return nil
}

func (c *Cluster) startBrokers(ctx context.Context) error {
	args := c.cfg.BrokerArgs
	if c.cfg.DisableFencing {
		if err := checkUnsafeBuild(ctx, c.cfg.Kproxy); err != nil {
			return err
		}
		args = append([]string{"--unsafe-disable-fencing"}, args...)
	}
	rig, err := testrig.NewCluster(testrig.ClusterConfig{
		Kproxy: c.cfg.Kproxy, LogDir: filepath.Join(c.cfg.Dir, "logs"), Etcd: c.cli, EtcdEndpoints: c.EtcdEndpoints(),
		Store: filepath.Join(c.cfg.Dir, "store"), LeaseTTL: c.cfg.LeaseTTL, Partitions: c.cfg.Partitions,
		BrokerArgs: args, BrokerEnv: c.cfg.BrokerEnv,
	})
	if err != nil {
		return err
	}
	c.rig = rig
	for i := range c.cfg.Brokers {
		id := int32(i + 1)
		b := &Broker{}
		var endpoints []string
		for _, m := range c.Members {
			r, err := faultnet.NewRelay("127.0.0.1:0", m.ClientAddr, c.log.With("relay", fmt.Sprintf("broker-%d->%s", id, m.Name)))
			if err != nil {
				return fmt.Errorf("relay for broker %d to %s: %w", id, m.Name, err)
			}
			b.Relays = append(b.Relays, r)
			endpoints = append(endpoints, "http://"+r.Addr())
		}
		c.Brokers = append(c.Brokers, b) // Close closes the relays
		var extra []string
		if z := c.ZoneOf(i); z != "" {
			extra = []string{"--rack", z}
		}
		if b.Broker, err = rig.AddBrokerWith(id, endpoints, extra...); err != nil {
			return err
		}
	}
	for _, b := range c.Brokers {
		if err := c.StartBroker(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// ZoneOf is the zone of broker or proxy i (from 0); "" without Zones.
func (c *Cluster) ZoneOf(i int) string {
	if len(c.cfg.Zones) == 0 {
		return ""
	}
	return c.cfg.Zones[i%len(c.cfg.Zones)]
}

// StartBroker starts a broker that is not running and waits until it is
// registered and answers Kafka requests.
func (c *Cluster) StartBroker(ctx context.Context, b *Broker) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.rig.StartBroker(ctx, b.Broker)
}

func (c *Cluster) startProxies(ctx context.Context) error {
	for j := range c.cfg.Proxies {
		var extra []string
		if z := c.ZoneOf(j); z != "" {
			extra = []string{"--zone", z, "--fetch-from", "zone"}
		}
		p, err := c.rig.AddProxy(extra...)
		if err != nil {
			return err
		}
		c.Proxies = append(c.Proxies, p)
	}
	for _, p := range c.Proxies {
		if err := c.StartProxy(ctx, p, len(c.Brokers)); err != nil {
			return err
		}
	}
	return nil
}

// StartProxy starts a proxy that is not running and waits until it is ready
// and sees at least brokers live brokers.
func (c *Cluster) StartProxy(ctx context.Context, p *Proxy, brokers int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.rig.StartProxy(ctx, p, brokers)
}

// EtcdEndpoints are the members' client URLs (direct, without relays).
func (c *Cluster) EtcdEndpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = "http://" + m.ClientAddr
	}
	return out
}

// ProxyAddrs are the proxies' Kafka addresses in order.
func (c *Cluster) ProxyAddrs() []string {
	out := make([]string, len(c.Proxies))
	for i, p := range c.Proxies {
		out[i] = p.Addr
	}
	return out
}

// ProxyZones are the proxies' zones in ProxyAddrs' order (nil without
// Zones).
func (c *Cluster) ProxyZones() []string {
	if len(c.cfg.Zones) == 0 {
		return nil
	}
	out := make([]string, len(c.Proxies))
	for i := range c.Proxies {
		out[i] = c.ZoneOf(i)
	}
	return out
}

// Close ends every process and relay. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.rig != nil {
			if err := c.rig.Close(5 * time.Second); err != nil {
				c.log.Warn("stop brokers and proxies", "err", err)
			}
		}
		var members []*testrig.Proc
		for _, m := range c.Members {
			if m.Proc != nil {
				members = append(members, m.Proc)
			}
		}
		if err := testrig.StopAll(5*time.Second, members...); err != nil {
			c.log.Warn("stop etcd members", "err", err)
		}
		for _, b := range c.Brokers {
			for _, r := range b.Relays {
				r.Close()
			}
		}
		if c.cli != nil {
			c.cli.Close()
		}
	})
}

// checkUnsafeBuild fails unless kproxy was built with testrig.UnsafeTag: a
// product binary would refuse --unsafe-disable-fencing only once every
// broker had failed to start.
func checkUnsafeBuild(ctx context.Context, kproxy string) error {
	help, err := exec.CommandContext(ctx, kproxy, "broker", "--help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s broker --help: %w", kproxy, err)
	}
	if !bytes.Contains(help, []byte("--unsafe-disable-fencing")) {
		return fmt.Errorf("%s has no --unsafe-disable-fencing: build it with -tags %s", kproxy, testrig.UnsafeTag)
	}
	return nil
}
