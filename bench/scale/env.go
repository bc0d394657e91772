package scale

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Env is one cold start's processes: `kproxy etcd`, the brokers and the
// proxies, each its own process, started fresh so that runs do not share
// state. `make scale` starts one per size; integration's 30,000-partition
// test starts one too, so both measure the same set-up.
type Env struct {
	etcd     *testrig.Proc
	endpoint string
	cli      *clientv3.Client
	rig      *testrig.Cluster
	layout   layout.Layout
	dataDir  string
}

// EnvConfig says how many of each to run.
type EnvConfig struct {
	Dir, Kproxy      string // work folder; the kproxy binary (testrig.Build)
	Brokers, Proxies int
	LeaseTTL         time.Duration // 0: the brokers' default
	Name             string        // folder under Dir for this run's logs
	// BrokerFlags and ProxyFlags, if set, give one broker's (by id) and
	// one proxy's (by index from 0) own flags (`make zones`: --rack,
	// --zone, --fetch-from).
	BrokerFlags func(id int32) []string
	ProxyFlags  func(i int) []string
	// Store is the brokers' --store (default "memory": each broker its
	// own, so no broker can read another's segments).
	Store string
}

// StartEnv starts etcd, then cfg.Brokers brokers (ids 1 up, memory store)
// and cfg.Proxies proxies, and returns once each is ready; on an error
// everything it started is stopped again.
func StartEnv(ctx context.Context, cfg EnvConfig) (e *Env, err error) {
	e = &Env{layout: layout.New("")}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	logDir := filepath.Join(cfg.Dir, cfg.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("log folder: %w", err)
	}
	addr, err := testrig.FreeAddr()
	if err != nil {
		return nil, err
	}
	// tmpfs when there is one: etcd's fsync on a shared disk would measure
	// the disk, not the proxy's and brokers' use of etcd.
	if e.dataDir, err = os.MkdirTemp("/dev/shm", "kproxy-scale-etcd-"); err != nil {
		e.dataDir = filepath.Join(logDir, "etcd-data")
	}
	e.etcd = testrig.NewProc(testrig.Spec{Name: "etcd", Path: cfg.Kproxy, LogPath: filepath.Join(logDir, "etcd.log"),
		Args: []string{"etcd", "--listen-client", addr, "--data-dir", e.dataDir}, Ready: "serving clients"})
	if err := e.etcd.Start(ctx); err != nil {
		return nil, err
	}
	e.endpoint = "http://" + addr
	if e.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	e.rig, err = testrig.NewCluster(testrig.ClusterConfig{Kproxy: cfg.Kproxy, LogDir: logDir, Etcd: e.cli,
		EtcdEndpoints: []string{e.endpoint}, Store: cmp.Or(cfg.Store, "memory"), LeaseTTL: cfg.LeaseTTL, LogLevel: "warn"})
	if err != nil {
		return nil, err
	}
	for i := range cfg.Brokers {
		var extra []string
		if cfg.BrokerFlags != nil {
			extra = cfg.BrokerFlags(int32(i + 1))
		}
		if _, err := e.rig.AddBrokerWith(int32(i+1), nil, extra...); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Proxies {
		var extra []string
		if cfg.ProxyFlags != nil {
			extra = cfg.ProxyFlags(i)
		}
		if _, err := e.rig.AddProxy(extra...); err != nil {
			return nil, err
		}
	}
	if err := e.rig.StartAll(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Rig is the brokers and proxies.
func (e *Env) Rig() *testrig.Cluster { return e.rig }

// Close stops every process and removes etcd's data.
func (e *Env) Close() {
	if e.rig != nil {
		_ = e.rig.Close(15 * time.Second)
	}
	if e.cli != nil {
		e.cli.Close()
	}
	if e.etcd != nil {
		_ = e.etcd.Stop(15 * time.Second)
	}
	if e.dataDir != "" {
		os.RemoveAll(e.dataDir)
	}
}

// PutTopic writes topic's key straight to etcd (as CreateTopics would) and
// waits until every proxy's table is complete up to it.
func (e *Env) PutTopic(ctx context.Context, topic string, partitions int32) error {
	id, err := topicID()
	if err != nil {
		return err
	}
	info := layout.TopicInfo{Name: topic, ID: id, Partitions: partitions}
	resp, err := e.cli.Put(ctx, e.layout.TopicKey(topic), layout.Marshal(info))
	if err != nil {
		return fmt.Errorf("put topic %s: %w", topic, err)
	}
	return e.waitProxies(ctx, resp.Header.Revision, time.Minute)
}

// waitProxies waits until every proxy's routing table is complete up to
// etcd revision rev (its /readyz revision).
func (e *Env) waitProxies(ctx context.Context, rev int64, timeout time.Duration) error {
	for _, p := range e.rig.Proxies {
		if err := waitRevision(ctx, p.AdminAddr, rev, timeout); err != nil {
			return fmt.Errorf("%s: %w", p.Proc.Name(), err)
		}
	}
	return nil
}

// WaitTopic waits until every proxy's routing table holds topic, created by
// whatever means (CreateTopics through one proxy, say): it reads the topic's
// key from etcd and waits for that revision.
func (e *Env) WaitTopic(ctx context.Context, topic string, timeout time.Duration) error {
	resp, err := e.cli.Get(ctx, e.layout.TopicKey(topic))
	if err != nil {
		return fmt.Errorf("read topic %s: %w", topic, err)
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("topic %s is not in etcd", topic)
	}
	return e.waitProxies(ctx, resp.Header.Revision, timeout)
}
