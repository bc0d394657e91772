package leasewatch

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/routing"
	"github.com/kproxy/kproxy/testkit/faultnet"
	"github.com/kproxy/kproxy/testkit/testrig"
)

func TestWatcherInitialSyncAndEvents(t *testing.T) {
	_, cli := etcdtest.Start(t)
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

// blockingReset delays the first Reset (after the listing, before the watch
// starts) until release is closed.
type blockingReset struct {
	etcdmirror.Handler
	once    sync.Once
	listed  chan struct{}
	release chan struct{}
}

func (b *blockingReset) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	b.Handler.Reset(kvs, rev)
	b.once.Do(func() {
		close(b.listed)
		<-b.release
	})
}

// TestWatcherNoGapUnderConcurrentWrites keeps changing ownership while the
// watcher starts, and holds the watcher between its listing and its watch
// while half the writes happen: the table must still end equal to etcd.
func TestWatcherNoGapUnderConcurrentWrites(t *testing.T) {
	_, cli := etcdtest.Start(t)
	l := layout.New("/kp")
	wr := writer{t, cli, l}
	for id := range int32(3) {
		wr.broker(id)
	}
	wr.topic("t", 16)
	f := &fixture{l: l, table: routing.NewTable(), reg: prometheus.NewRegistry()}
	w, err := New(Config{Client: cli, Layout: l, Table: f.table, Registerer: f.reg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.w = w
	h := &blockingReset{
		Handler: &tableHandler{w: w, dec: decoder{layout: l, log: slog.New(slog.DiscardHandler), bad: w.bad}},
		listed:  make(chan struct{}), release: make(chan struct{}),
	}
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(h.release)
		for i := 0; i < 300 && ctx.Err() == nil; i++ {
			switch i {
			case 20:
				close(started)
			case 150:
				// The rest are written while the watcher sits between its
				// listing and its watch.
				select {
				case <-h.listed:
				case <-ctx.Done():
				}
			}
			p := int32(i % 16)
			ops := []clientv3.Op{clientv3.OpPut(l.EpochKey("t", p), ""),
				clientv3.OpPut(l.OwnerKey("t", p), layout.Marshal(layout.Owner{Broker: int32(i % 3)}))}
			if i%7 == 0 {
				ops = []clientv3.Op{clientv3.OpDelete(l.OwnerKey("t", p))}
			}
			if i%50 == 25 {
				name := fmt.Sprintf("t%d", i)
				ops = append(ops, clientv3.OpPut(l.TopicKey(name), layout.Marshal(layout.TopicInfo{Name: name, ID: topicID, Partitions: 2})))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil && ctx.Err() == nil {
				t.Errorf("concurrent write %d: %v", i, err)
				return
			}
		}
	}()
	<-started
	runSync(t, etcdmirror.SyncConfig{Client: cli, Prefix: l.MetaPrefix(), Handler: h, ProgressInterval: 50 * time.Millisecond})
	wg.Wait()
	f.waitConverged(t, cli)
}

// TestWatcherRecoversFromFaults cuts or pauses the watcher's connection to
// etcd, changes (and in some cases compacts) etcd meanwhile, then heals.
// Without compaction the watch resumes from its revision; with it, the
// revision is gone and the watcher must re-list.
func TestWatcherRecoversFromFaults(t *testing.T) {
	cases := []struct {
		name    string
		fault   func(*faultnet.Relay)
		compact bool
	}{
		{"cut", (*faultnet.Relay).Cut, false},
		{"cut+compact", (*faultnet.Relay).Cut, true},
		{"pause+compact", (*faultnet.Relay).Pause, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, direct := etcdtest.Start(t)
			relay := newRelay(t, srv.Endpoint)
			cli := etcdtest.NewClient(t, "http://"+relay.Addr())
			wr := writer{t, direct, layout.New("/kp")}
			wr.broker(1)
			wr.broker(2)
			wr.topic("t", 4)
			for p := range int32(4) {
				wr.acquire("t", p, 1)
			}
			f := startWatcher(t, cli, nil)
			f.waitConverged(t, direct)

			tc.fault(relay)
			f.waitStatus(t, "disconnected", func(s Status) bool { return !s.Connected })
			for p := range int32(4) {
				wr.acquire("t", p, 2)
			}
			wr.del(wr.l.BrokerKey(1))
			wr.topic("new", 2)
			if tc.compact {
				compact(t, direct)
			}
			// Meanwhile routing still uses the last known table.
			if o, _, owned := f.table.Owner("t", 0); o != 1 || !owned {
				t.Fatalf("table changed while cut off: Owner(t,0) = (%d,%v)", o, owned)
			}
			relay.Heal()
			f.waitConverged(t, direct)
			relists := testutil.ToFloat64(f.w.resyncs.WithLabelValues(etcdmirror.ReasonCompacted))
			if tc.compact && relists < 1 {
				t.Fatalf("compacted resyncs = %v, want >= 1", relists)
			}
			if !tc.compact && relists != 0 {
				t.Fatalf("re-listed %v times without a compaction", relists)
			}
			if !f.w.Status().Connected {
				t.Fatal("not connected after convergence")
			}
		})
	}
}

// compact compacts etcd up to its current revision.
func compact(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatalf("get revision: %v", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
}

// TestWatcherSurvivesEtcdRestart stops etcd, checks the table is kept and
// its age grows, restarts etcd on the same data and address, and checks the
// watcher reconnects and converges.
func TestWatcherSurvivesEtcdRestart(t *testing.T) {
	addr, err := testrig.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, stop := startEtcd(t, dir, addr)
	cli := etcdtest.NewClient(t, srv.Endpoint)
	wr := writer{t, cli, layout.New("/kp")}
	wr.broker(1)
	wr.topic("t", 2)
	wr.acquire("t", 0, 1)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := startWatcher(t, cli, clock.Now)
	before := f.table.Snapshot()

	stop()
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
	_, cli := etcdtest.Start(t)
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
	// A second watcher on the same registry shares the counters (promreg's
	// policy: a metric never stops a feeder from starting).
	w2, err := New(Config{Client: cli, Table: routing.NewTable(), Registerer: f.reg})
	if err != nil {
		t.Fatalf("second watcher on the same registry: %v", err)
	}
	if w2.events != f.w.events || w2.resyncs != f.w.resyncs {
		t.Fatal("second watcher on the same registry does not share its counters")
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
