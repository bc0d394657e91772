package kfake

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
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

	"github.com/kproxy/kproxy/assembly/devcluster/proxytest"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
)

// numBrokers is the size of every kfake cluster here: enough that
// partitions, groups and leader moves span several brokers.
const numBrokers = 3

// setupTimeout bounds each step of building an environment.
const setupTimeout = 20 * time.Second

type topicSpec struct {
	name       string
	partitions int32
}

// partState is what kfake says about one partition.
type partState struct {
	leader, epoch int32
}

// env is one etcd, one kfake cluster and one proxy routing to it. Clients
// made with env.client talk to the proxy only; env.direct talks to kfake and
// gives the reference answers.
type env struct {
	t      *testing.T
	lay    layout.Layout
	etcd   *clientv3.Client
	fake   *kf.Cluster
	direct *kgo.Client
	srv    *assembly.Proxy
	reg    *prometheus.Registry
	nodes  map[int32]string // kfake node id -> host:port
	ids    map[string][16]byte
}

// in returns e for use in subtest t: failures and cleanups then belong to
// t (a parent's FailNow must not be called from a subtest).
func (e *env) in(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// isolatedConns is the proxy's UpstreamConnsPerBroker in every test but
// the head-of-line one. kfake, like Apache Kafka, handles one request at a
// time per connection, so a long-polling Fetch or a JoinGroup waiting for a
// rebalance holds up every request queued behind it on that connection.
// The shared connections, picked by client connection id modulo this
// number, now carry requests only to brokers that answer out of order
// (kfake gets on-demand connections per client connection); the many
// slots stay so that the tests keep their subject if that changes.
// TestUpstreamHeadOfLine checks the default.
const isolatedConns = 1024

// newEnv starts everything and waits until the proxy routes every topic's
// partitions to their kfake leaders at kfake's leader epochs.
func newEnv(t *testing.T, topics ...topicSpec) *env {
	t.Helper()
	return newEnvConns(t, isolatedConns, topics...)
}

// newEnvConns is newEnv with upstreamConns connections per broker (0: the
// proxy's default).
func newEnvConns(t *testing.T, upstreamConns int, topics ...topicSpec) *env {
	t.Helper()
	log := testLogger(t)
	_, cli := etcdtest.Start(t)
	opts := []kf.Opt{kf.NumBrokers(numBrokers), kf.ClusterID("kfake-under-kproxy")}
	for _, ts := range topics {
		opts = append(opts, kf.SeedTopics(ts.partitions, ts.name))
	}
	fake, err := kf.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	e := &env{
		t: t, lay: layout.New(""), etcd: cli, fake: fake,
		nodes: map[int32]string{}, ids: map[string][16]byte{},
	}
	e.direct = newKgo(t, fake.ListenAddrs())
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	e.alignEpochs(topics)
	rev := e.publishBrokers(ctx)
	for _, ts := range topics {
		rev = max(rev, e.publishTopic(ctx, ts.name))
	}
	e.startProxy(log, upstreamConns)
	e.waitRoutes(rev)
	return e
}

// alignEpochs moves every partition to its own leader once. kfake starts
// partitions at leader epoch 0, but an epoch key's version (our epoch)
// starts at 1: after one move both say 1, so the epochs clients learn from
// the proxy are the epochs kfake checks in Fetch and ListOffsets.
func (e *env) alignEpochs(topics []topicSpec) {
	e.t.Helper()
	for _, ts := range topics {
		for p := range ts.partitions {
			leader := e.fake.LeaderFor(ts.name, p)
			if err := e.fake.MoveTopicPartition(ts.name, p, leader); err != nil {
				e.t.Fatalf("kfake: bump epoch of %s/%d: %v", ts.name, p, err)
			}
		}
	}
}

// kfakeMetadata asks kfake directly for brokers and partition leaders.
func (e *env) kfakeMetadata(ctx context.Context, topics ...string) *kmsg.MetadataResponse {
	e.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, e.direct)
	if err != nil {
		e.t.Fatalf("kfake metadata: %v", err)
	}
	return resp
}

func (e *env) partitions(ctx context.Context, topic string) map[int32]partState {
	e.t.Helper()
	resp := e.kfakeMetadata(ctx, topic)
	out := map[int32]partState{}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			e.t.Fatalf("kfake metadata for %s: error %d", topic, rt.ErrorCode)
		}
		e.ids[topic] = rt.TopicID
		for _, rp := range rt.Partitions {
			out[rp.Partition] = partState{leader: rp.Leader, epoch: rp.LeaderEpoch}
		}
	}
	return out
}

// publishBrokers registers every kfake broker under its own node id.
func (e *env) publishBrokers(ctx context.Context) int64 {
	e.t.Helper()
	var rev int64
	for _, b := range e.kfakeMetadata(ctx).Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		e.nodes[b.NodeID] = addr
		rev = e.put(ctx, e.lay.BrokerKey(b.NodeID), layout.Marshal(layout.BrokerInfo{ID: b.NodeID, Addr: addr, Started: time.Now()}))
	}
	if len(e.nodes) != numBrokers {
		e.t.Fatalf("kfake metadata names %d brokers, want %d", len(e.nodes), numBrokers)
	}
	return rev
}

// publishTopic writes the topic (with kfake's topic id) and every
// partition's owner and epoch.
func (e *env) publishTopic(ctx context.Context, topic string) int64 {
	e.t.Helper()
	parts := e.partitions(ctx, topic)
	id := e.ids[topic]
	rev := e.put(ctx, e.lay.TopicKey(topic), layout.Marshal(layout.TopicInfo{
		Name: topic, ID: hex.EncodeToString(id[:]), Partitions: int32(len(parts)),
	}))
	for p := range int32(len(parts)) {
		rev = max(rev, e.publishPartition(ctx, topic, p, parts[p]))
	}
	return rev
}

// publishPartition makes etcd say what kfake says: the owner is kfake's
// leader and the epoch key's version is kfake's leader epoch.
func (e *env) publishPartition(ctx context.Context, topic string, p int32, st partState) int64 {
	e.t.Helper()
	rev := e.put(ctx, e.lay.OwnerKey(topic, p), layout.Marshal(layout.Owner{Broker: st.leader}))
	return max(rev, e.bumpEpochTo(ctx, e.lay.EpochKey(topic, p), st.epoch))
}

func (e *env) bumpEpochTo(ctx context.Context, key string, epoch int32) int64 {
	e.t.Helper()
	resp, err := e.etcd.Get(ctx, key)
	if err != nil {
		e.t.Fatalf("etcd get %s: %v", key, err)
	}
	var version, rev int64
	if len(resp.Kvs) > 0 {
		version = resp.Kvs[0].Version
	}
	if version > int64(epoch) {
		e.t.Fatalf("%s: etcd epoch %d is ahead of kfake's %d", key, version, epoch)
	}
	for ; version < int64(epoch); version++ {
		rev = e.put(ctx, key, "")
	}
	return rev
}

// republish re-reads kfake's leader and epoch of one partition and writes
// them to etcd; it returns the revision to wait for.
func (e *env) republish(ctx context.Context, topic string, p int32) int64 {
	e.t.Helper()
	return e.publishPartition(ctx, topic, p, e.partitions(ctx, topic)[p])
}

// publishCoordinator routes group to the broker kfake names in
// FindCoordinator.
func (e *env) publishCoordinator(ctx context.Context, group string) int64 {
	e.t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(ctx, e.direct)
	if err != nil {
		e.t.Fatalf("kfake FindCoordinator %s: %v", group, err)
	}
	node := resp.NodeID
	if len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		if c.ErrorCode != 0 {
			e.t.Fatalf("kfake FindCoordinator %s: error %d", group, c.ErrorCode)
		}
		node = c.NodeID
	}
	if want := e.fake.CoordinatorFor(group); node != want {
		e.t.Fatalf("kfake FindCoordinator says %d for %s, CoordinatorFor says %d", node, group, want)
	}
	rev := e.put(ctx, e.lay.CoordinatorKey(group), layout.Marshal(layout.Owner{Broker: node}))
	return max(rev, e.put(ctx, e.lay.CoordinatorEpochKey(group), ""))
}

func (e *env) put(ctx context.Context, key, val string) int64 {
	e.t.Helper()
	resp, err := e.etcd.Put(ctx, key, val)
	if err != nil {
		e.t.Fatalf("etcd put %s: %v", key, err)
	}
	return resp.Header.Revision
}

func (e *env) startProxy(log *slog.Logger, upstreamConns int) {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	e.srv = proxytest.Start(e.t, assembly.Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: e.etcd, Layout: e.lay,
		ClusterID: "kproxy-over-kfake", Registry: e.reg, Logger: log, Server: proxy.Config{DrainTimeout: 2 * time.Second},
		UpstreamConnsPerBroker: upstreamConns,
	})
}

// waitRoutes waits until the proxy's routing table includes etcd revision
// rev.
func (e *env) waitRoutes(rev int64) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last adminapi.Readiness
	for time.Now().Before(deadline) {
		if r, err := adminapi.FetchReadiness(context.Background(), e.srv.AdminAddr()); err == nil {
			last = r
			if r.Synced && r.Revision >= rev {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("proxy routing did not reach etcd revision %d within 10s (last readiness %+v)", rev, last)
}

// client is a kgo client whose only seed is the proxy; it fails the test if
// it ever connects anywhere else (a leaked kfake address in a response).
func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	g := &addrGuard{want: e.srv.Addr()}
	opts = append([]kgo.Opt{kgo.WithHooks(g)}, opts...)
	cl := newKgo(e.t, []string{e.srv.Addr()}, opts...)
	e.t.Cleanup(func() {
		if bad := g.strays(); len(bad) > 0 {
			e.t.Errorf("a client of the proxy connected to %v: some response leaked a broker address other than the proxy's %s", bad, g.want)
		}
	})
	return cl
}

func newKgo(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)
	if os.Getenv("KPROXY_TEST_LOG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo client for %v: %v", seeds, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// addrGuard records connections to anything but the proxy.
type addrGuard struct {
	want string
	mu   sync.Mutex
	bad  []string
}

var _ kgo.HookBrokerConnect = (*addrGuard)(nil)

func (g *addrGuard) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, _ error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	if addr == g.want {
		return
	}
	g.mu.Lock()
	g.bad = append(g.bad, fmt.Sprintf("node %d at %s", meta.NodeID, addr))
	g.mu.Unlock()
}

func (g *addrGuard) strays() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.bad...)
}

// retries reads the proxy's retry counter for api and reason.
func (e *env) retries(api, reason string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatalf("gather proxy metrics: %v", err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == api && labels["reason"] == reason {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// testLogger writes the proxy's warnings (everything with KPROXY_TEST_LOG)
// to the test's output, and nothing once the test has ended.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(w.stop) // registered first, so it runs after everything else stopped
	level := slog.LevelWarn
	if os.Getenv("KPROXY_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	mu      sync.Mutex
	w       io.Writer
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}
