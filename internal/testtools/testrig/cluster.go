package testrig

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
)

// ClusterConfig describes `kproxy broker` and `kproxy serve` processes run
// against an etcd the caller runs (an embedded server, `kproxy etcd`, or the
// fault suite's members). Zero values take kproxy's own defaults.
type ClusterConfig struct {
	Kproxy string           // the kproxy binary (required)
	LogDir string           // each process appends to LogDir/<name>.log (required)
	Etcd   *clientv3.Client // the rig's client: broker readiness reads registrations (required)
	// EtcdEndpoints are the client URLs proxies use, and brokers unless
	// AddBroker is given their own (required).
	EtcdEndpoints []string
	Store         string        // brokers' --store: one shared folder, or "memory" (required)
	LeaseTTL      time.Duration // brokers' --lease-ttl
	Partitions    int32         // --default-partitions of auto-created topics
	LogLevel      string        // --log-level of every process
	// BrokerArgs, BrokerEnv and ProxyArgs are added to every broker's and
	// proxy's command line and environment.
	BrokerArgs []string
	BrokerEnv  []string
	ProxyArgs  []string
}

// Broker is one `kproxy broker`; Addr is both its listener and what it
// advertises.
type Broker struct {
	ID          int32
	Addr        string
	MetricsAddr string
	Proc        *Proc
}

// Proxy is one `kproxy serve`; Addr is both its listener and what it
// advertises.
type Proxy struct {
	Index     int
	Addr      string
	AdminAddr string
	Proc      *Proc
}

// Cluster is a set of broker and proxy processes. Add them, then start them;
// each keeps its ports and command line across restarts.
type Cluster struct {
	cfg     ClusterConfig
	layout  layout.Layout
	Brokers []*Broker
	Proxies []*Proxy
}

// NewCluster checks cfg; nothing runs until a Start.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Kproxy == "" || cfg.LogDir == "" || cfg.Etcd == nil || len(cfg.EtcdEndpoints) == 0 || cfg.Store == "" {
		return nil, errors.New("testrig cluster: Kproxy, LogDir, Etcd, EtcdEndpoints and Store are required")
	}
	return &Cluster{cfg: cfg, layout: layout.New("")}, nil
}

// AddBroker adds broker id on free ports. etcd are the endpoints this
// broker dials (nil: the cluster's), so that a rig can put relays between
// one broker and etcd.
func (c *Cluster) AddBroker(id int32, etcd []string) (*Broker, error) {
	return c.AddBrokerWith(id, etcd)
}

// AddBrokerWith is AddBroker with `kproxy broker` flags for this broker
// alone (e.g. its --rack), after ClusterConfig.BrokerArgs.
func (c *Cluster) AddBrokerWith(id int32, etcd []string, extra ...string) (*Broker, error) {
	addrs, err := FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	if etcd == nil {
		etcd = c.cfg.EtcdEndpoints
	}
	b := &Broker{ID: id, Addr: addrs[0], MetricsAddr: addrs[1]}
	args := []string{"broker", "--id", strconv.Itoa(int(id)), "--listen", b.Addr, "--advertise", b.Addr,
		"--metrics", b.MetricsAddr, "--etcd-endpoints", strings.Join(etcd, ","), "--store", c.cfg.Store}
	if c.cfg.LeaseTTL > 0 {
		args = append(args, "--lease-ttl", c.cfg.LeaseTTL.String())
	}
	args = append(append(append(args, c.commonArgs()...), c.cfg.BrokerArgs...), extra...)
	name := fmt.Sprintf("broker-%d", id)
	b.Proc = NewProc(Spec{Name: name, Path: c.cfg.Kproxy, Args: args, Env: c.cfg.BrokerEnv, LogPath: c.logPath(name)})
	c.Brokers = append(c.Brokers, b)
	return b, nil
}

// AddProxy adds a proxy on free ports; extra are `kproxy serve` flags for
// this proxy alone, after ClusterConfig.ProxyArgs.
func (c *Cluster) AddProxy(extra ...string) (*Proxy, error) {
	addrs, err := FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Index: len(c.Proxies), Addr: addrs[0], AdminAddr: addrs[1]}
	args := []string{"serve", "--listen", p.Addr, "--admin", p.AdminAddr, "--advertise", p.Addr,
		"--etcd-endpoints", strings.Join(c.cfg.EtcdEndpoints, ",")}
	args = append(append(append(args, c.commonArgs()...), c.cfg.ProxyArgs...), extra...)
	name := fmt.Sprintf("proxy-%d", p.Index+1)
	p.Proc = NewProc(Spec{Name: name, Path: c.cfg.Kproxy, Args: args, LogPath: c.logPath(name)})
	c.Proxies = append(c.Proxies, p)
	return p, nil
}

func (c *Cluster) commonArgs() []string {
	var args []string
	if c.cfg.Partitions > 0 {
		args = append(args, "--default-partitions", strconv.Itoa(int(c.cfg.Partitions)))
	}
	if c.cfg.LogLevel != "" {
		args = append(args, "--log-level", c.cfg.LogLevel)
	}
	return args
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.cfg.LogDir, name+".log") }

// StartBroker starts a broker that is not running and waits until it is
// registered in etcd and answers a Kafka request.
func (c *Cluster) StartBroker(ctx context.Context, b *Broker) error {
	if err := b.Proc.Start(ctx); err != nil {
		return err
	}
	return WaitFor(ctx, b.Proc.Name(), b.Proc, 60*time.Second, func(ctx context.Context) error {
		resp, err := c.cfg.Etcd.Get(ctx, c.layout.BrokerKey(b.ID))
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return errors.New("not registered")
		}
		return Ping(ctx, b.Addr)
	})
}

// StartProxy starts a proxy that is not running and waits until it is
// ready and sees at least brokers live brokers.
func (c *Cluster) StartProxy(ctx context.Context, p *Proxy, brokers int) error {
	if err := p.Proc.Start(ctx); err != nil {
		return err
	}
	return c.WaitProxy(ctx, p, brokers)
}

// WaitProxy waits until a running proxy is ready and sees at least brokers
// live brokers; it gives up early if the proxy exits.
func (c *Cluster) WaitProxy(ctx context.Context, p *Proxy, brokers int) error {
	return WaitFor(ctx, p.Proc.Name(), p.Proc, 60*time.Second, func(ctx context.Context) error {
		r, err := adminapi.FetchReadiness(ctx, p.AdminAddr)
		if err != nil {
			return err
		}
		if !r.Ready || r.LiveBrokers < brokers {
			return fmt.Errorf("ready=%t live brokers %d of %d", r.Ready, r.LiveBrokers, brokers)
		}
		return nil
	})
}

// StartAll starts every broker that is not running, then every proxy, and
// waits until each proxy sees every broker.
func (c *Cluster) StartAll(ctx context.Context) error {
	for _, b := range c.Brokers {
		if !b.Proc.Running() {
			if err := c.StartBroker(ctx, b); err != nil {
				return err
			}
		}
	}
	for _, p := range c.Proxies {
		if !p.Proc.Running() {
			if err := c.StartProxy(ctx, p, len(c.Brokers)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProxyAddrs are the proxies' Kafka addresses in order.
func (c *Cluster) ProxyAddrs() []string {
	out := make([]string, len(c.Proxies))
	for i, p := range c.Proxies {
		out[i] = p.Addr
	}
	return out
}

// Close stops the proxies, then the brokers (gracefully: they hand their
// partitions over), each within grace, and returns what went wrong.
func (c *Cluster) Close(grace time.Duration) error {
	var procs []*Proc
	for _, p := range c.Proxies {
		procs = append(procs, p.Proc)
	}
	err := StopAll(grace, procs...)
	procs = procs[:0]
	for _, b := range c.Brokers {
		procs = append(procs, b.Proc)
	}
	return errors.Join(err, StopAll(grace, procs...))
}

// StopAll stops procs in parallel, each within grace.
func StopAll(grace time.Duration, procs ...*Proc) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.Stop(grace) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Ping asks the Kafka listener at addr for its API versions.
func Ping(ctx context.Context, addr string) error { return PingWith(ctx, addr) }

// PingWith is Ping with more client options (e.g. capped versions).
func PingWith(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cl.Ping(pctx)
}

// WaitFor calls check, with a growing pause, until it returns nil, timeout
// passes, ctx ends or the process p exits; the error says what was last
// wrong, or shows the end of p's log.
func WaitFor(ctx context.Context, what string, p *Proc, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := p.Done()
	var last error
	for attempt := 0; ; attempt++ {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready within %s: %w", what, timeout, last)
		case <-done:
			return fmt.Errorf("%s: process exited (%v): %s", what, p.Err(), p.Tail())
		case <-time.After(min(50*time.Millisecond*time.Duration(attempt+1), 500*time.Millisecond)):
		}
	}
}

// Owners reads the owner of every owned partition of topic from etcd:
// partition to broker id.
func (c *Cluster) Owners(ctx context.Context, topic string) (map[int32]int32, error) {
	resp, err := c.cfg.Etcd.Get(ctx, c.layout.MetaPrefix()+"owners/"+topic+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read owners of %s: %w", topic, err)
	}
	owners := make(map[int32]int32)
	for _, kv := range resp.Kvs {
		k := c.layout.Parse(string(kv.Key))
		if k.Kind != layout.KindOwner || k.Topic != topic {
			continue
		}
		b, err := layout.DecodeOwner(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("owner %s: %w", kv.Key, err)
		}
		owners[k.Partition] = b
	}
	return owners, nil
}
