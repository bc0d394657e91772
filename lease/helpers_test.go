package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
)

// Short TTL keeps expiry tests fast. etcd's minimum with default election
// settings is about 2s, so asking for 2s gets exactly 2s.
const (
	testTTL    = 2 * time.Second
	testMargin = 500 * time.Millisecond
)

var testLayout = layout.New("/test")

// The lease kit takes each resource's state key from its caller; these
// tests keep state under their own prefix, as a broker embedding the kit
// keeps it in its own schema.
func testStateKey(name string) string { return "/test/state/" + name }

func testPartition(topic string, p int32) lease.Resource {
	return lease.PartitionResource(testLayout, topic, p, testStateKey(fmt.Sprintf("%s/%d", topic, p)))
}

func testGroup(group string) lease.Resource {
	return lease.GroupResource(testLayout, group, testStateKey("group/"+group))
}

func testLogger() *slog.Logger {
	if os.Getenv("LEASE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newSession(t *testing.T, cli *clientv3.Client, broker int32) *lease.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := lease.NewSession(ctx, lease.Config{
		Client: cli, Layout: testLayout, BrokerID: broker,
		TTL: testTTL, SafetyMargin: testMargin, Logger: testLogger().With("test", t.Name()),
	})
	if err != nil {
		t.Fatalf("new session for broker %d: %v", broker, err)
	}
	t.Cleanup(s.Close)
	return s
}

func tctx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, s *lease.Session, r lease.Resource) *lease.Ownership {
	t.Helper()
	o, err := s.Acquire(tctx(t, 10*time.Second), r)
	if err != nil {
		t.Fatalf("acquire %s: %v", r.Name, err)
	}
	return o
}

// get reads a key directly from etcd (not through any relay).
func get(t *testing.T, cli *clientv3.Client, key string) (value string, modRev, createRev int64, found bool) {
	t.Helper()
	resp, err := cli.Get(tctx(t, 5*time.Second), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, 0, false
	}
	kv := resp.Kvs[0]
	return string(kv.Value), kv.ModRevision, kv.CreateRevision, true
}

// eventually polls cond every 10ms until it holds or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if cond() {
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not true within %v", what, limit)
	return time.Time{}
}

// nextLoss waits for a loss report on s.
func nextLoss(t *testing.T, s *lease.Session, limit time.Duration) lease.Loss {
	t.Helper()
	select {
	case _, ok := <-s.LossReady():
		if !ok {
			t.Fatal("loss notifications closed")
		}
		ls := s.TakeLosses()
		if len(ls) != 1 {
			t.Fatalf("%d losses pending, want 1: %+v", len(ls), ls)
		}
		return ls[0]
	case <-time.After(limit):
		t.Fatalf("no loss reported within %v", limit)
		return lease.Loss{}
	}
}

func noLoss(t *testing.T, s *lease.Session) {
	t.Helper()
	if ls := s.TakeLosses(); len(ls) > 0 {
		t.Fatalf("unexpected losses: %+v", ls)
	}
}

// only is the single resource of a per-resource loss.
func only(t *testing.T, l lease.Loss) lease.Resource {
	t.Helper()
	if l.Session || len(l.Resources) != 1 {
		t.Fatalf("loss = %+v; want one resource, not a session loss", l)
	}
	return l.Resources[0]
}

func startEtcd(t *testing.T) (*etcdlocal.Server, *clientv3.Client) {
	t.Helper()
	return etcdtest.Start(t)
}

func isFenced(err error) bool { return errors.Is(err, lease.ErrFenced) }
