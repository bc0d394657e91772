// Package kafscalerig runs real KafScale brokers for kproxy's tests and
// benchmarks: KafScale's broker and proxy built from the source archive that
// KAFSCALE_SRC names (Build), a local S3 (moto_server) on a random
// 127.0.0.1 port, an embedded etcd (internal/etcdlocal), the metadata
// snapshot naming every broker and topic written before the brokers start,
// and the brokers themselves, each on its own ports, which can be killed
// (SIGKILL) and restarted. Optionally KafScale's own proxy in front of them.
// kproxy itself is the caller's: in-process (rigtest.StartKproxy) or as a
// process (the kafscale-peer benchmark).
//
// The promise: every process Start starts ends with Close (and with the
// test process: children get SIGKILL through the parent-death signal),
// every wait is bounded. The limit: Linux, 127.0.0.1 only, and it needs
// KAFSCALE_SRC, moto_server and the Go module proxy; tests use Require,
// which skips without KAFSCALE_SRC outside CI and fails in CI. Only tests
// and test tools import it, never the product.
package kafscalerig

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/testtools/testrig"
	"github.com/kproxy/kproxy/leasewatch/kafscale/kafscaletest"
)

// Prefix is KafScale's etcd root.
const Prefix = "/kafscale"

// StartWait bounds each process's start.
const StartWait = 60 * time.Second

// Config says what to run. Bins and Dir are required.
type Config struct {
	Bins Bins
	Dir  string // logs (<name>.log) and temp files; the caller removes it
	// Topics to list in the snapshot: name to partition count. Brokers
	// auto-create topics with the partition count of the first one (4 when
	// there is none).
	Topics map[string]int32
	// Brokers is how many brokers to run (default 2), ids 0..Brokers-1.
	Brokers int
	// BrokerEnv is added to every broker's environment (KAFSCALE_* tuning,
	// e.g. KAFSCALE_SEGMENT_BYTES).
	BrokerEnv []string
	// KafScaleProxy also starts KafScale's own proxy (Rig.KafScaleProxy).
	KafScaleProxy bool
}

// Broker is one running KafScale broker.
type Broker struct {
	ID                             int32
	Addr, MetricsAddr, ControlAddr string
	Proc                           *testrig.Proc
}

// Rig is a running KafScale cluster.
type Rig struct {
	cfg          Config
	etcdSrv      *etcdlocal.Server
	Etcd         *clientv3.Client
	EtcdEndpoint string
	S3Endpoint   string
	Brokers      []*Broker
	// KafScaleProxyAddr is KafScale's own proxy, when Config.KafScaleProxy.
	KafScaleProxyAddr string
	KafScaleProxyProc *testrig.Proc

	mu    sync.Mutex
	procs []*testrig.Proc
}

// Start runs etcd, S3, the snapshot and the brokers (and KafScale's proxy);
// on error everything started so far is stopped.
func Start(ctx context.Context, cfg Config) (_ *Rig, err error) {
	if cfg.Bins.Broker == "" || cfg.Dir == "" {
		return nil, errors.New("kafscalerig: Config needs Bins and Dir")
	}
	if cfg.Brokers <= 0 {
		cfg.Brokers = 2
	}
	r := &Rig{cfg: cfg}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if err := r.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := r.startS3(ctx); err != nil {
		return nil, err
	}
	for id := range cfg.Brokers {
		if err := r.addBroker(int32(id)); err != nil {
			return nil, err
		}
	}
	if _, err := r.PutSnapshot(ctx); err != nil {
		return nil, err
	}
	for _, b := range r.Brokers {
		if err := r.StartBroker(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	if cfg.KafScaleProxy {
		if err := r.startKafScaleProxy(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Rig) startEtcd(ctx context.Context) error {
	s, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: filepath.Join(r.cfg.Dir, "etcd"), UnsafeNoFsync: true})
	if err != nil {
		return fmt.Errorf("kafscalerig: start etcd: %w", err)
	}
	r.etcdSrv, r.EtcdEndpoint = s, s.Endpoint
	r.Etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("kafscalerig: etcd client: %w", err)
	}
	return nil
}

// startS3 runs moto_server; KafScale creates its bucket on first use.
func (r *Rig) startS3(ctx context.Context) error {
	addr, err := testrig.FreeAddr()
	if err != nil {
		return err
	}
	host, port, _ := strings.Cut(addr, ":")
	p := r.proc(testrig.Spec{Name: "moto", Path: "moto_server", Args: []string{"-H", host, "-p", port}, LogPath: r.logPath("moto")})
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("kafscalerig: start moto_server (is it installed?): %w", err)
	}
	r.S3Endpoint = "http://" + addr
	return testrig.WaitFor(ctx, "moto_server", p, StartWait, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.S3Endpoint+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

func (r *Rig) addBroker(id int32) error {
	addrs, err := testrig.FreeAddrs(3)
	if err != nil {
		return err
	}
	b := &Broker{ID: id, Addr: addrs[0], MetricsAddr: addrs[1], ControlAddr: addrs[2]}
	parts := int32(4)
	for _, n := range r.cfg.Topics {
		parts = n
		break
	}
	env := []string{
		"KAFSCALE_BROKER_ID=" + strconv.Itoa(int(id)), "KAFSCALE_BROKER_ADDR=" + b.Addr,
		"KAFSCALE_METRICS_ADDR=" + b.MetricsAddr, "KAFSCALE_CONTROL_ADDR=" + b.ControlAddr,
		"KAFSCALE_ETCD_ENDPOINTS=" + r.EtcdEndpoint,
		"KAFSCALE_S3_BUCKET=kafscale", "KAFSCALE_S3_REGION=us-east-1", "KAFSCALE_S3_ENDPOINT=" + r.S3Endpoint,
		"KAFSCALE_S3_PATH_STYLE=true", "KAFSCALE_S3_ACCESS_KEY=test", "KAFSCALE_S3_SECRET_KEY=test",
		"KAFSCALE_AUTO_CREATE_PARTITIONS=" + strconv.Itoa(int(parts)),
	}
	name := fmt.Sprintf("kafscale-broker-%d", id)
	b.Proc = r.proc(testrig.Spec{Name: name, Path: r.cfg.Bins.Broker, Env: append(env, r.cfg.BrokerEnv...), LogPath: r.logPath(name)})
	r.Brokers = append(r.Brokers, b)
	return nil
}

// Broker returns broker id, or nil.
func (r *Rig) Broker(id int32) *Broker {
	for _, b := range r.Brokers {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// StartBroker starts (or restarts) broker id and waits until it answers
// ApiVersions.
func (r *Rig) StartBroker(ctx context.Context, id int32) error {
	b := r.Broker(id)
	if b == nil {
		return fmt.Errorf("kafscalerig: no broker %d", id)
	}
	if err := b.Proc.Start(ctx); err != nil {
		return fmt.Errorf("kafscalerig: %w", err)
	}
	return testrig.WaitFor(ctx, b.Proc.Name(), b.Proc, StartWait, func(ctx context.Context) error { return Ping(ctx, b.Addr) })
}

// KillBroker sends SIGKILL to broker id and waits until it is reaped. Its
// leases stay in etcd until their 10 s TTL runs out.
func (r *Rig) KillBroker(id int32) error {
	b := r.Broker(id)
	if b == nil {
		return fmt.Errorf("kafscalerig: no broker %d", id)
	}
	return b.Proc.Kill()
}

// PutSnapshot writes the metadata snapshot naming every broker and topic,
// as KafScale's operator does; it returns the revision.
func (r *Rig) PutSnapshot(ctx context.Context) (int64, error) {
	var addrs []kafscaletest.Addr
	for _, b := range r.Brokers {
		host, port, _ := strings.Cut(b.Addr, ":")
		p, _ := strconv.Atoi(port)
		addrs = append(addrs, kafscaletest.Addr{ID: b.ID, Host: host, Port: int32(p)})
	}
	var topics []kafscaletest.Topic
	for name, n := range r.cfg.Topics {
		topics = append(topics, kafscaletest.Topic{Name: name, ID: TopicID(name), Partitions: n})
	}
	return kafscaletest.PutSnapshot(ctx, r.Etcd, Prefix, addrs, topics)
}

// TopicID is KafScale's topic id: the first 16 bytes of SHA-1 of the name.
func TopicID(name string) [16]byte {
	sum := sha1.Sum([]byte(name))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

func (r *Rig) startKafScaleProxy(ctx context.Context) error {
	addr, err := testrig.FreeAddr()
	if err != nil {
		return err
	}
	_, port, _ := strings.Cut(addr, ":")
	env := []string{"KAFSCALE_PROXY_ADDR=" + addr, "KAFSCALE_PROXY_ADVERTISED_HOST=127.0.0.1",
		"KAFSCALE_PROXY_ADVERTISED_PORT=" + port, "KAFSCALE_PROXY_ETCD_ENDPOINTS=" + r.EtcdEndpoint}
	p := r.proc(testrig.Spec{Name: "kafscale-proxy", Path: r.cfg.Bins.Proxy, Env: env, LogPath: r.logPath("kafscale-proxy")})
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("kafscalerig: %w", err)
	}
	r.KafScaleProxyAddr, r.KafScaleProxyProc = addr, p
	return testrig.WaitFor(ctx, "kafscale-proxy", p, StartWait, func(ctx context.Context) error { return Ping(ctx, addr) })
}

func (r *Rig) proc(spec testrig.Spec) *testrig.Proc {
	p := testrig.NewProc(spec)
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p
}

func (r *Rig) logPath(name string) string { return filepath.Join(r.cfg.Dir, name+".log") }

// LogTail is the end of process name's log ("kafscale-broker-0", "moto",
// "kafscale-proxy"), for failure messages.
func (r *Rig) LogTail(name string, n int) string {
	b, err := os.ReadFile(r.logPath(name))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Close kills every process (brokers first, so that none writes to a gone
// S3 or etcd) and stops etcd.
func (r *Rig) Close() error {
	r.mu.Lock()
	procs := append([]*testrig.Proc(nil), r.procs...)
	r.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].Kill())
	}
	if r.Etcd != nil {
		r.Etcd.Close()
	}
	if r.etcdSrv != nil {
		r.etcdSrv.Close()
	}
	return errors.Join(errs...)
}
