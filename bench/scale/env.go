package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/testrig"
	"github.com/kproxy/kproxy/layout"
)

// env is one size's processes: `kproxy etcd`, the brokers and the proxies,
// each its own process, started fresh so that sizes do not share state.
type env struct {
	etcd     *testrig.Proc
	endpoint string
	cli      *clientv3.Client
	rig      *testrig.Cluster
	layout   layout.Layout
	dataDir  string
}

// envConfig says how many of each to run.
type envConfig struct {
	dir, kproxy       string
	brokers, proxies  int
	leaseTTL          time.Duration
	name              string // folder under dir for this size's logs
	startBrokersFirst bool
}

func startEnv(ctx context.Context, cfg envConfig) (e *env, err error) {
	e = &env{layout: layout.New("")}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	logDir := filepath.Join(cfg.dir, cfg.name)
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
	e.etcd = testrig.NewProc(testrig.Spec{Name: "etcd", Path: cfg.kproxy, LogPath: filepath.Join(logDir, "etcd.log"),
		Args: []string{"etcd", "--listen-client", addr, "--data-dir", e.dataDir}, Ready: "serving clients"})
	if err := e.etcd.Start(ctx); err != nil {
		return nil, err
	}
	e.endpoint = "http://" + addr
	if e.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	e.rig, err = testrig.NewCluster(testrig.ClusterConfig{Kproxy: cfg.kproxy, LogDir: logDir, Etcd: e.cli,
		EtcdEndpoints: []string{e.endpoint}, Store: "memory", LeaseTTL: cfg.leaseTTL, LogLevel: "warn"})
	if err != nil {
		return nil, err
	}
	for i := range cfg.brokers {
		if _, err := e.rig.AddBroker(int32(i+1), nil); err != nil {
			return nil, err
		}
	}
	for range cfg.proxies {
		if _, err := e.rig.AddProxy(); err != nil {
			return nil, err
		}
	}
	if err := e.rig.StartAll(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
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

// putTopic writes topic's key straight to etcd (as CreateTopics would) and
// waits until every proxy's table is complete up to it.
func (e *env) putTopic(ctx context.Context, topic string, partitions int32) error {
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
func (e *env) waitProxies(ctx context.Context, rev int64, timeout time.Duration) error {
	for _, p := range e.rig.Proxies {
		if err := waitRevision(ctx, p.AdminAddr, rev, timeout); err != nil {
			return fmt.Errorf("%s: %w", p.Proc.Name(), err)
		}
	}
	return nil
}
