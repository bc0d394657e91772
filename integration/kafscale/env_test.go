package kafscale

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kf "github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/assembly/devcluster/proxytest"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/internal/testtools/testrig"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/leasewatch/kafscale/kafscaletest"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
)

const (
	prefix     = "/kafscale"
	numBrokers = 3
	stepWait   = 20 * time.Second // bounds every wait for the proxy
)

// served is one partition request a kfake broker received.
type served struct {
	node  int32
	key   int16
	topic string
	part  int32
	owner int32 // the lease owner when it arrived (-1: unowned)
}

// env is one etcd, one kfake cluster acting as KafScale, and one proxy in
// KafScale mode.
type env struct {
	t    testing.TB
	etcd *clientv3.Client
	fake *kf.Cluster
	srv  *assembly.Proxy
	reg  *prometheus.Registry

	mu      sync.Mutex
	addrs   map[int32]kafscaletest.Addr
	brokers map[int32]*kafscaletest.Broker
	topics  map[string]kafscaletest.Topic
	names   map[[16]byte]string
	held    map[heldKey]bool
	log     []served
}

func newEnv(t testing.TB, topics map[string]int32) *env {
	t.Helper()
	_, cli := etcdtest.Start(t)
	opts := []kf.Opt{kf.NumBrokers(numBrokers), kf.ClusterID("kafscale-under-kproxy")}
	for name, n := range topics {
		opts = append(opts, kf.SeedTopics(n, name))
	}
	fake, err := kf.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	e := &env{
		t: t, etcd: cli, fake: fake,
		addrs: map[int32]kafscaletest.Addr{}, brokers: map[int32]*kafscaletest.Broker{},
		topics: map[string]kafscaletest.Topic{}, names: map[[16]byte]string{}, held: map[heldKey]bool{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepWait)
	defer cancel()
	e.learnKfake(ctx)
	for id := range e.addrs {
		b, err := kafscaletest.StartBroker(ctx, cli, prefix, id, 10)
		if err != nil {
			t.Fatal(err)
		}
		e.brokers[id] = b
		t.Cleanup(func() { b.Crash() })
	}
	e.emulate()
	rev := e.putSnapshot(ctx, e.liveIDs()...)
	e.startProxy()
	e.waitRoutes(rev)
	return e
}

// learnKfake reads kfake's brokers and topic ids: the snapshot names them,
// as KafScale's operator names its brokers.
func (e *env) learnKfake(ctx context.Context) {
	direct, err := kgo.NewClient(kgo.SeedBrokers(e.fake.ListenAddrs()...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer direct.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, direct)
	if err != nil {
		e.t.Fatalf("kfake metadata: %v", err)
	}
	for _, b := range resp.Brokers {
		e.addrs[b.NodeID] = kafscaletest.Addr{ID: b.NodeID, Host: b.Host, Port: b.Port}
	}
	for _, rt := range resp.Topics {
		e.topics[*rt.Topic] = kafscaletest.Topic{Name: *rt.Topic, ID: rt.TopicID, Partitions: int32(len(rt.Partitions))}
		e.names[rt.TopicID] = *rt.Topic
	}
	if len(e.addrs) != numBrokers {
		e.t.Fatalf("kfake names %d brokers, want %d", len(e.addrs), numBrokers)
	}
}

func (e *env) liveIDs() []int32 {
	var ids []int32
	for id := range e.addrs {
		ids = append(ids, id)
	}
	return ids
}

// putSnapshot writes the snapshot naming brokers ids, as KafScale's
// operator does; it returns the revision.
func (e *env) putSnapshot(ctx context.Context, ids ...int32) int64 {
	e.t.Helper()
	var addrs []kafscaletest.Addr
	for _, id := range ids {
		addrs = append(addrs, e.addrs[id])
	}
	var topics []kafscaletest.Topic
	for _, tp := range e.topics {
		topics = append(topics, tp)
	}
	rev, err := kafscaletest.PutSnapshot(ctx, e.etcd, prefix, addrs, topics)
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

func (e *env) startProxy() {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	e.srv = proxytest.Start(e.t, assembly.Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: e.etcd,
		Layout: layout.New(prefix), EtcdLayout: assembly.LayoutKafScale,
		ClusterID: "kproxy-over-kafscale", Registry: e.reg, Logger: testLogger(e.t), Server: proxy.Config{DrainTimeout: 2 * time.Second},
		// kfake serves one request at a time per connection: long polls
		// must not hold up the other clients' requests.
		UpstreamConnsPerBroker: 1024,
	})
}

// waitReady waits until /readyz satisfies cond.
func (e *env) waitReady(what string, cond func(adminapi.Readiness) bool) adminapi.Readiness {
	e.t.Helper()
	return waitReadyAt(e.t, e.srv.AdminAddr(), what, cond)
}

// waitReadyAt waits until the /readyz of the proxy at admin satisfies cond.
func waitReadyAt(t testing.TB, admin, what string, cond func(adminapi.Readiness) bool) adminapi.Readiness {
	t.Helper()
	deadline := time.Now().Add(stepWait)
	var last adminapi.Readiness
	for time.Now().Before(deadline) {
		if r, err := adminapi.FetchReadiness(context.Background(), admin); err == nil {
			last = r
			if cond(r) {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("proxy: %s not within %s (last readiness %+v)", what, stepWait, last)
	return last
}

func (e *env) waitRoutes(rev int64) {
	e.t.Helper()
	e.waitReady(fmt.Sprintf("routing at etcd revision %d", rev), func(r adminapi.Readiness) bool { return r.Synced && r.Revision >= rev })
}

// owner reads a partition's lease key: -1 if nobody leases it.
func (e *env) owner(ctx context.Context, topic string, p int32) int32 {
	resp, err := e.etcd.Get(ctx, kafscaletest.PartitionKey(prefix, topic, p))
	if err != nil || len(resp.Kvs) == 0 {
		return -1
	}
	id, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil {
		return -1
	}
	return int32(id)
}

// served returns what the brokers received so far.
func (e *env) servedLog() []served {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]served(nil), e.log...)
}

// client is a kgo client whose only seed is the proxy.
func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	return proxyClient(e.t, e.srv.Addr(), opts...)
}

// proxyClient is a kgo client whose only seed is the proxy at addr,
// closed when the test ends.
func proxyClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	if os.Getenv("KPROXY_TEST_LOG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testLogger keeps the proxy's warnings (everything with KPROXY_TEST_LOG)
// and prints them only if the test failed, once the proxy has stopped
// (its cleanup is registered after this one, so it runs first).
func testLogger(t testing.TB) *slog.Logger {
	var buf testrig.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy log:\n%s", buf.String())
		}
	})
	level := slog.LevelWarn
	if os.Getenv("KPROXY_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
}
