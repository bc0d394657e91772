package leasewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/routing"
	"github.com/kproxy/kproxy/testkit/faultnet"
)

// waitTimeout bounds every wait for the watch to catch up. Reconnects after
// a cut wait for gRPC's own reconnect backoff, hence the generous bound.
const waitTimeout = 30 * time.Second

// runSync starts etcdmirror.Sync until the test ends.
func runSync(t *testing.T, cfg etcdmirror.SyncConfig) {
	t.Helper()
	runUntilCleanup(t, "Sync", func(ctx context.Context) error { return etcdmirror.Sync(ctx, cfg) })
}

// runUntilCleanup runs run in a goroutine until the test ends, then cancels
// it and checks that it returns context.Canceled promptly.
func runUntilCleanup(t *testing.T, what string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s returned %v, want context.Canceled", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not return within 10s of cancel", what)
		}
	})
}

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
	runUntilCleanup(t, "Run", w.Run)
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

// startEtcd starts etcd on dir and addr; the returned stop function may be
// called early and is called again (harmlessly) when the test ends.
func startEtcd(t *testing.T, dir, addr string) (*etcdlocal.Server, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{Dir: dir, ClientAddr: addr, UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd on %s: %v", addr, err)
	}
	stop := sync.OnceFunc(srv.Close) // a second Close panics
	t.Cleanup(stop)
	return srv, stop
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
