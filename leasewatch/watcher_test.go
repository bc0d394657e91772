package leasewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/faultnet"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/routing"
)

// fakeClock is the watcher's clock in tests that check ages.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a watcher over a table, started and stopped with the test.
type fixture struct {
	l     layout.Layout
	table *routing.Table
	w     *Watcher
	reg   *prometheus.Registry
}

func startWatcher(t *testing.T, cli *clientv3.Client, now func() time.Time) *fixture {
	t.Helper()
	f := &fixture{l: layout.New("/kp"), table: routing.NewTable(), reg: prometheus.NewRegistry()}
	w, err := New(Config{
		Client: cli, Layout: f.l, Table: f.table, Registerer: f.reg, Now: now,
		Logger:           slog.New(slog.DiscardHandler),
		ProgressInterval: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of cancel")
		}
	})
	select {
	case <-w.Synced():
	case <-time.After(waitTimeout):
		t.Fatal("watcher not synced")
	}
	return f
}

// waitTable waits until cond holds, re-checking at every table change.
func (f *fixture) waitTable(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		ch := f.table.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; table: %+v", what, f.table.Snapshot())
		}
	}
}

// waitStatus polls Status (it has no change channel) until cond holds.
func (f *fixture) waitStatus(t *testing.T, what string, cond func(Status) bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond(f.w.Status()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, f.w.Status())
		}
		<-tick.C
	}
}

// waitConverged waits until the watcher has seen etcd's current revision and
// checks the table equals one loaded from a fresh listing.
func (f *fixture) waitConverged(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, f.l.MetaPrefix(), clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("list meta: %v", err)
	}
	f.waitStatus(t, fmt.Sprintf("revision %d", resp.Header.Revision), func(s Status) bool { return s.Revision >= resp.Header.Revision })
	b := routing.NewBuilder()
	d := newDecoder(f.l)
	for _, kv := range resp.Kvs {
		d.put(b, kv)
	}
	want := routing.NewTable()
	want.Replace(b)
	if got, w := f.table.Snapshot(), want.Snapshot(); !reflect.DeepEqual(got, w) {
		t.Fatalf("table differs from etcd at revision %d:\n got %+v\nwant %+v", resp.Header.Revision, got, w)
	}
	if f.table.Len() != want.Len() {
		t.Fatalf("Len = %d, etcd has %d owner keys", f.table.Len(), want.Len())
	}
}

// writer writes layout keys the way brokers do.
type writer struct {
	t   *testing.T
	cli *clientv3.Client
	l   layout.Layout
}

func (w writer) do(what string, ops ...clientv3.Op) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w writer) broker(id int32, opts ...clientv3.OpOption) {
	w.t.Helper()
	v := layout.Marshal(layout.BrokerInfo{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 9000+id)})
	w.do("put broker", clientv3.OpPut(w.l.BrokerKey(id), v, opts...))
}

func (w writer) topic(name string, n int32) {
	w.t.Helper()
	v := layout.Marshal(layout.TopicInfo{Name: name, ID: topicID, Partitions: n})
	w.do("put topic", clientv3.OpPut(w.l.TopicKey(name), v))
}

// acquire is the broker's acquisition: bump the epoch key, put the owner key.
func (w writer) acquire(topic string, p, broker int32, opts ...clientv3.OpOption) {
	w.t.Helper()
	w.do("acquire", clientv3.OpPut(w.l.EpochKey(topic, p), ""),
		clientv3.OpPut(w.l.OwnerKey(topic, p), layout.Marshal(layout.Owner{Broker: broker}), opts...))
}

func (w writer) coordinator(group string, broker int32) {
	w.t.Helper()
	w.do("acquire group", clientv3.OpPut(w.l.CoordinatorEpochKey(group), ""),
		clientv3.OpPut(w.l.CoordinatorKey(group), layout.Marshal(layout.Owner{Broker: broker})))
}

func (w writer) del(key string) {
	w.t.Helper()
	w.do("delete "+key, clientv3.OpDelete(key))
}

func grant(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	return resp.ID
}

func TestWatcherInitialSyncAndEvents(t *testing.T) {
	_, cli := etcdlocal.StartForTest(t)
	wr := writer{t, cli, layout.New("/kp")}
	lease := grant(t, cli)
	wr.broker(1, clientv3.WithLease(lease))
	wr.broker(2)
	wr.topic("orders", 3)
	wr.acquire("orders", 0, 1, clientv3.WithLease(lease))
	wr.acquire("orders", 0, 1, clientv3.WithLease(lease)) // epoch 2
	wr.acquire("orders", 1, 2)
	wr.acquire("early", 0, 2) // owner before its topic
	wr.coordinator("g", 2)
	wr.do("bad values", clientv3.OpPut(wr.l.BrokerKey(7), "{not json"), clientv3.OpPut(wr.l.TopicKey("bad"), `{"name":"bad","id":"zz","partitions":1}`))

	f := startWatcher(t, cli, nil)
	st := f.w.Status()
	if !st.Synced || !st.Connected || st.Revision == 0 || st.LastSync.IsZero() {
		t.Fatalf("Status after sync = %+v", st)
	}
	if o, e, owned := f.table.Owner("orders", 0); o != 1 || e != 2 || !owned {
		t.Fatalf("Owner(orders,0) = (%d,%d,%v), want (1,2,true)", o, e, owned)
	}
	if o, e, owned := f.table.Owner("orders", 1); o != 2 || e != 1 || !owned {
		t.Fatalf("Owner(orders,1) = (%d,%d,%v), want (2,1,true)", o, e, owned)
	}
	if _, ok := f.table.Topic("bad"); ok {
		t.Fatal("topic with a bad id loaded")
	}
	if _, ok := f.table.Broker(7); ok {
		t.Fatal("broker with a bad value loaded")
	}
	if c, owned := f.table.Coordinator("g"); c != 2 || !owned || f.table.CoordinatorEpoch("g") != 1 {
		t.Fatalf("Coordinator(g) = (%d,%v)", c, owned)
	}
	if got := testutil.ToFloat64(f.w.bad.WithLabelValues("broker")) + testutil.ToFloat64(f.w.bad.WithLabelValues("topic")); got != 2 {
		t.Fatalf("bad values counted: %v, want 2", got)
	}
	f.waitConverged(t, cli)

	// Events: the topic arrives after its owner, ownership moves, a lease ends.
	wr.topic("early", 1)
	f.waitTable(t, "early/0 routable", func() bool { _, _, ok := f.table.Owner("early", 0); return ok })
	wr.acquire("orders", 1, 1)
	f.waitTable(t, "orders/1 moved to broker 1", func() bool {
		o, e, _ := f.table.Owner("orders", 1)
		return o == 1 && e == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	f.waitTable(t, "broker 1 and its lease-bound owner key gone", func() bool {
		_, live := f.table.Broker(1)
		o, e, _ := f.table.Owner("orders", 0)
		return !live && o == -1 && e == 2
	})
	if _, _, owned := f.table.Owner("orders", 1); owned {
		t.Fatal("partition owned by a dead broker counts as owned")
	}
	if r, ok := f.table.Route("orders", 1, -1); !ok || r != 2 {
		t.Fatalf("Route(orders,1) with its owner dead = (%d,%v), want the only live broker 2", r, ok)
	}
	f.waitConverged(t, cli)
	for _, kind := range []string{"broker", "topic", "owner", "epoch"} {
		if testutil.ToFloat64(f.w.events.WithLabelValues(kind)) == 0 {
			t.Errorf("no %s events counted", kind)
		}
	}
}

// TestWatcherNoGapUnderConcurrentWrites starts the watcher while a writer
// keeps changing ownership, then checks the table equals etcd.
func TestWatcherNoGapUnderConcurrentWrites(t *testing.T) {
	_, cli := etcdlocal.StartForTest(t)
	l := layout.New("/kp")
	wr := writer{t, cli, l}
	for id := range int32(3) {
		wr.broker(id)
	}
	wr.topic("t", 16)
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300 && ctx.Err() == nil; i++ {
			if i == 20 {
				close(started)
			}
			p := int32(i % 16)
			ops := []clientv3.Op{clientv3.OpPut(l.EpochKey("t", p), ""),
				clientv3.OpPut(l.OwnerKey("t", p), layout.Marshal(layout.Owner{Broker: int32(i % 3)}))}
			if i%7 == 0 {
				ops = []clientv3.Op{clientv3.OpDelete(l.OwnerKey("t", p))}
			}
			if i%50 == 25 {
				ops = append(ops, clientv3.OpPut(l.TopicKey(fmt.Sprintf("t%d", i)), layout.Marshal(layout.TopicInfo{Name: fmt.Sprintf("t%d", i), ID: topicID, Partitions: 2})))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil && ctx.Err() == nil {
				t.Errorf("concurrent write %d: %v", i, err)
				return
			}
		}
	}()
	<-started
	f := startWatcher(t, cli, nil)
	wg.Wait()
	f.waitConverged(t, cli)
}

// TestWatcherResyncsAfterCompaction cuts the watcher off from etcd, changes
// and compacts etcd meanwhile, and heals: the watch cannot resume from its
// revision, so the watcher must re-list.
func TestWatcherResyncsAfterCompaction(t *testing.T) {
	srv, direct := etcdlocal.StartForTest(t)
	relay := newRelay(t, srv.Endpoint)
	cli := etcdlocal.NewClientForTest(t, "http://"+relay.Addr())
	wr := writer{t, direct, layout.New("/kp")}
	wr.broker(1)
	wr.broker(2)
	wr.topic("t", 4)
	for p := range int32(4) {
		wr.acquire("t", p, 1)
	}
	f := startWatcher(t, cli, nil)
	f.waitConverged(t, direct)

	relay.Cut()
	f.waitStatus(t, "disconnected", func(s Status) bool { return !s.Connected })
	for p := range int32(4) {
		wr.acquire("t", p, 2)
	}
	wr.del(wr.l.BrokerKey(1))
	wr.topic("new", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := direct.Get(ctx, "/")
	if err != nil {
		t.Fatalf("get revision: %v", err)
	}
	if _, err := direct.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	// Meanwhile routing still uses the last known table.
	if o, _, owned := f.table.Owner("t", 0); o != 1 || !owned {
		t.Fatalf("table changed while cut off: Owner(t,0) = (%d,%v)", o, owned)
	}
	relay.Heal()
	f.waitConverged(t, direct)
	if n := testutil.ToFloat64(f.w.resyncs.WithLabelValues(ReasonCompacted)); n < 1 {
		t.Fatalf("compacted resyncs = %v, want >= 1", n)
	}
	if !f.w.Status().Connected {
		t.Fatal("not connected after convergence")
	}
}

// TestWatcherSurvivesEtcdRestart stops etcd, checks the table is kept and
// its age grows, restarts etcd on the same data and address, and checks the
// watcher reconnects and converges.
func TestWatcherSurvivesEtcdRestart(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	srv := startEtcd(t, dir, addr)
	cli := etcdlocal.NewClientForTest(t, srv.Endpoint)
	wr := writer{t, cli, layout.New("/kp")}
	wr.broker(1)
	wr.topic("t", 2)
	wr.acquire("t", 0, 1)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := startWatcher(t, cli, clock.Now)
	before := f.table.Snapshot()

	srv.Close()
	f.waitStatus(t, "disconnected", func(s Status) bool { return !s.Connected })
	clock.Advance(7 * time.Second)
	st := f.w.Status()
	if st.Age < 7*time.Second || !st.Synced || st.Connected {
		t.Fatalf("Status while etcd is down = %+v, want age >= 7s", st)
	}
	if got := f.w.Status().Age; got < st.Age {
		t.Fatalf("age went backwards: %v then %v", st.Age, got)
	}
	if after := f.table.Snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("table changed while etcd was down:\n%+v\n%+v", before, after)
	}
	if r, ok := f.table.Route("t", 0, -1); !ok || r != 1 {
		t.Fatalf("Route while etcd is down = (%d,%v), want (1,true)", r, ok)
	}
	if v := gaugeValue(t, f.reg, "kproxy_routes_staleness_seconds"); v < 7 {
		t.Fatalf("staleness gauge = %v, want >= 7", v)
	}

	startEtcd(t, dir, addr)
	putRetry(t, cli, wr.l.OwnerKey("t", 1), layout.Marshal(layout.Owner{Broker: 1}))
	f.waitTable(t, "owner written after restart", func() bool { _, _, ok := f.table.Owner("t", 1); return ok })
	f.waitStatus(t, "reconnected", func(s Status) bool { return s.Connected && s.Age == 0 })
	f.waitConverged(t, cli)
}

func TestWatcherMetrics(t *testing.T) {
	_, cli := etcdlocal.StartForTest(t)
	wr := writer{t, cli, layout.New("/kp")}
	wr.broker(1)
	wr.topic("t", 3)
	wr.acquire("t", 0, 1)
	wr.acquire("t", 2, 1)
	f := startWatcher(t, cli, nil)
	if v := gaugeValue(t, f.reg, "kproxy_routes_partitions"); v != 2 {
		t.Fatalf("kproxy_routes_partitions = %v, want 2", v)
	}
	if v := gaugeValue(t, f.reg, "kproxy_routes_staleness_seconds"); v < 0 || v > 60 {
		t.Fatalf("kproxy_routes_staleness_seconds = %v", v)
	}
	wr.acquire("t", 1, 1)
	f.waitTable(t, "t/1 owned", func() bool { _, _, ok := f.table.Owner("t", 1); return ok })
	if v := testutil.ToFloat64(f.w.events.WithLabelValues("owner")); v != 1 {
		t.Fatalf("owner events = %v, want 1", v)
	}
	if v := testutil.ToFloat64(f.w.events.WithLabelValues("epoch")); v != 1 {
		t.Fatalf("epoch events = %v, want 1", v)
	}
	n, err := testutil.GatherAndCount(f.reg, "kproxy_watch_events_total", "kproxy_routes_partitions", "kproxy_routes_staleness_seconds")
	if err != nil || n < 3 {
		t.Fatalf("gathered %d series (%v)", n, err)
	}
	// A second watcher on the same registry is a configuration error.
	if _, err := New(Config{Client: cli, Table: routing.NewTable(), Registerer: f.reg}); err == nil {
		t.Fatal("duplicate metric registration not reported")
	}
	if _, err := New(Config{Client: cli}); err == nil {
		t.Fatal("New without a table succeeded")
	}
}

func TestStatusBeforeSync(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	w, err := New(Config{Client: &clientv3.Client{}, Table: routing.NewTable(), Now: clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	clock.Advance(3 * time.Second)
	if st := w.Status(); st.Synced || st.Connected || st.Age != 3*time.Second || !st.LastSync.IsZero() {
		t.Fatalf("Status before sync = %+v", st)
	}
	select {
	case <-w.Synced():
		t.Fatal("Synced closed before sync")
	default:
	}
}

func gaugeValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not gathered", name)
	return 0
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startEtcd(t *testing.T, dir, addr string) *etcdlocal.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: dir, ClientAddr: addr, UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd on %s: %v", addr, err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// putRetry puts through a client that may still be reconnecting.
func putRetry(t *testing.T, cli *clientv3.Client, k, v string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, k, v)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s after restart: %v", k, err)
		}
	}
}

func hostPort(endpoint string) string {
	return strings.TrimPrefix(endpoint, "http://")
}

// newRelay puts a faultnet relay in front of an etcd endpoint.
func newRelay(t *testing.T, endpoint string) *faultnet.Relay {
	t.Helper()
	r, err := faultnet.NewRelay("127.0.0.1:0", hostPort(endpoint), nil)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
