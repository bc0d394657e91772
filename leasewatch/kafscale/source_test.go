package kafscale

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/leasewatch/kafscale/kafscaletest"
	"github.com/kproxy/kproxy/routing"
)

const waitTimeout = 15 * time.Second

const prefix = "/kafscale"

type fixture struct {
	t     *testing.T
	cli   *clientv3.Client
	table *routing.Table
	src   *Source
	reg   *prometheus.Registry
}

// startSource runs a Source over a new owner-only table until the test
// ends; edit, if given, changes its config.
func startSource(t *testing.T, cli *clientv3.Client, edit ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, cli: cli, table: routing.NewTable(), reg: prometheus.NewRegistry()}
	f.table.SetOwnerOnly(true)
	cfg := Config{
		Client: cli, Table: f.table, Registerer: f.reg, Logger: slog.New(slog.DiscardHandler),
		ProgressInterval: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	src, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.src = src
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
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
	case <-src.Synced():
	case <-time.After(waitTimeout):
		t.Fatal("source not synced")
	}
	return f
}

// waitFor waits, on table changes, until cond holds.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		ch := f.table.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond): // Status changes are not table changes
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s; table %+v, status %+v", what, f.table.Snapshot(), f.src.Status())
		}
	}
}

func (f *fixture) gauge(name string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return gaugeOf(mf.GetMetric()[0])
		}
	}
	f.t.Fatalf("metric %s not registered", name)
	return 0
}

func gaugeOf(m *dto.Metric) float64 { return m.GetGauge().GetValue() }

func routeIs(tb *routing.Table, topic string, p, want int32) func() bool {
	return func() bool { b, ok := tb.RouteAvoiding(topic, p, routing.Avoid{}); return ok && b == want }
}

func ownerIs(tb *routing.Table, topic string, p, want int32) func() bool {
	return func() bool { o, _, _ := tb.Owner(topic, p); return o == want }
}

func addrs(ids ...int32) []kafscaletest.Addr {
	out := make([]kafscaletest.Addr, 0, len(ids))
	for _, id := range ids {
		out = append(out, kafscaletest.Addr{ID: id, Host: "127.0.0.1", Port: 9000 + id})
	}
	return out
}

var topics = []kafscaletest.Topic{{Name: "orders", ID: TopicID("orders"), Partitions: 4}}

// TestSourceFollowsKafScale walks one KafScale history through the keys
// its brokers and operator write; after each step the table must say what
// a KafScale-aware router needs.
func TestSourceFollowsKafScale(t *testing.T) {
	_, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Three brokers run; the first started without a snapshot and wrote
	// one naming only itself.
	brokers := map[int32]*kafscaletest.Broker{}
	for _, id := range []int32{1, 2, 3} {
		ttl := int64(10)
		if id == 3 {
			ttl = 2 // crashes below: its leases run out soon
		}
		b, err := kafscaletest.StartBroker(ctx, cli, prefix, id, ttl)
		if err != nil {
			t.Fatal(err)
		}
		brokers[id] = b
	}
	if _, err := kafscaletest.PutSnapshot(ctx, cli, prefix, addrs(1), topics); err != nil {
		t.Fatal(err)
	}
	// Keys the router must ignore.
	if _, err := cli.Put(ctx, prefix+"/topics/orders/partitions/0/next_offset", "42"); err != nil {
		t.Fatal(err)
	}
	f := startSource(t, cli)
	if tp, ok := f.table.Topic("orders"); !ok || tp.ID != TopicID("orders") || tp.Partitions != 4 {
		t.Fatalf("topic from snapshot = %+v (%v)", tp, ok)
	}
	acquire := func(b int32, p int32) {
		t.Helper()
		if got, err := brokers[b].AcquirePartition(ctx, "orders", p); err != nil || got != b {
			t.Fatalf("broker %d acquiring orders/%d: owner %d, %v", b, p, got, err)
		}
	}
	epochs := map[int32][]int32{} // epochs seen per partition, in order
	seen := func(p int32) {
		epochs[p] = append(epochs[p], f.table.Epoch("orders", p))
	}

	steps := []struct {
		name string
		do   func()
		want func() bool
		then func()
	}{{
		name: "owner in the snapshot routes to it",
		do:   func() { acquire(1, 0) },
		want: routeIs(f.table, "orders", 0, 1),
		then: func() { seen(0) },
	}, {
		name: "owner missing from the snapshot: no route, reported",
		do:   func() { acquire(2, 1) },
		want: func() bool {
			return ownerIs(f.table, "orders", 1, 2)() && slices.Equal(f.src.Status().MissingBrokers, []int32{2})
		},
		then: func() {
			if b, ok := f.table.RouteAvoiding("orders", 1, routing.Avoid{}); ok {
				t.Errorf("partition of a broker missing from the snapshot routed to %d", b)
			}
			if g := f.gauge("kproxy_routes_missing_brokers"); g != 1 {
				t.Errorf("kproxy_routes_missing_brokers = %v, want 1", g)
			}
			seen(1)
		},
	}, {
		name: "the operator's snapshot lists every broker",
		do: func() {
			if _, err := kafscaletest.PutSnapshot(ctx, cli, prefix, addrs(1, 2, 3), topics); err != nil {
				t.Fatal(err)
			}
		},
		want: func() bool { return routeIs(f.table, "orders", 1, 2)() && len(f.src.Status().MissingBrokers) == 0 },
		then: func() {
			if g := f.gauge("kproxy_routes_missing_brokers"); g != 0 {
				t.Errorf("kproxy_routes_missing_brokers = %v, want 0", g)
			}
		},
	}, {
		name: "group lease",
		do: func() {
			if got, err := brokers[2].AcquireGroup(ctx, "team/a"); err != nil || got != 2 {
				t.Fatalf("group lease: %d, %v", got, err)
			}
		},
		want: func() bool { b, ok := f.table.RouteGroupAvoiding("team/a", routing.Avoid{}); return ok && b == 2 },
	}, {
		name: "a second broker's acquisition loses to the owner",
		do: func() {
			if got, err := brokers[3].AcquirePartition(ctx, "orders", 1); err != nil || got != 2 {
				t.Fatalf("acquire owned partition: owner %d, %v; want 2", got, err)
			}
			acquire(3, 2)
			acquire(3, 3)
		},
		want: func() bool { return routeIs(f.table, "orders", 1, 2)() && routeIs(f.table, "orders", 3, 3)() },
	}, {
		name: "graceful shutdown: every key of the broker goes at once",
		do: func() {
			if err := brokers[2].Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		},
		want: func() bool {
			_, gOwned := f.table.Coordinator("team/a")
			return ownerIs(f.table, "orders", 1, -1)() && !gOwned
		},
		then: func() {
			// Unowned: the rendezvous choice over the snapshot's brokers.
			if _, ok := f.table.RouteAvoiding("orders", 1, routing.Avoid{}); !ok {
				t.Error("unowned partition has no route")
			}
		},
	}, {
		name: "a new owner takes over with a higher epoch",
		do:   func() { acquire(1, 1) },
		want: routeIs(f.table, "orders", 1, 1),
		then: func() { seen(1) },
	}, {
		name: "crash: the leases run out after their TTL",
		do:   func() { brokers[3].Crash() },
		want: func() bool { return ownerIs(f.table, "orders", 2, -1)() && ownerIs(f.table, "orders", 3, -1)() },
	}, {
		name: "the crashed broker's partition is taken by another",
		do:   func() { acquire(1, 3) },
		want: routeIs(f.table, "orders", 3, 1),
	}, {
		name: "a snapshot that is not JSON keeps the last good one",
		do: func() {
			if _, err := cli.Put(ctx, kafscaletest.SnapshotKey(prefix), "not json"); err != nil {
				t.Fatal(err)
			}
		},
		want: func() bool { return testutilCounter(f, "kproxy_watch_bad_values_total") >= 1 },
		then: func() {
			if len(f.table.Brokers()) != 3 {
				t.Errorf("brokers after a bad snapshot: %+v", f.table.Brokers())
			}
		},
	}}
	for _, s := range steps {
		s.do()
		f.waitFor(s.name, s.want)
		if s.then != nil {
			s.then()
		}
	}
	if e := epochs[1]; len(e) != 2 || e[0] <= 0 || e[1] <= e[0] {
		t.Errorf("epochs of orders/1 across owner changes = %v, want growing", e)
	}

	// A replica started now (a full listing) agrees on owners and epochs.
	if _, err := kafscaletest.PutSnapshot(ctx, cli, prefix, addrs(1, 2, 3), topics); err != nil {
		t.Fatal(err)
	}
	g := startSource(t, cli)
	for p := range int32(4) {
		wo, we, _ := f.table.Owner("orders", p)
		if o, e, _ := g.table.Owner("orders", p); o != wo || (wo >= 0 && e != we) {
			t.Errorf("orders/%d: fresh replica says owner %d epoch %d, running one %d epoch %d", p, o, e, wo, we)
		}
	}
	if len(g.table.Brokers()) != 3 {
		t.Errorf("fresh replica: brokers %+v, want the snapshot's 3", g.table.Brokers())
	}
}

func testutilCounter(f *fixture, name string) float64 {
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("gather: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
