package etcdmirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
)

// waitTimeout bounds every wait for the watch to catch up. Reconnects after
// a cut wait for gRPC's own reconnect backoff, hence the generous bound.
const waitTimeout = 30 * time.Second

// recorder is a Handler that keeps a plain map, for testing Sync.
type recorder struct {
	mu     sync.Mutex
	kv     map[string]string
	rev    int64
	resets int
	synced int
	// onReset, if set, runs inside Reset (outside mu) before it returns.
	onReset func(n int)
	notify  chan struct{} // signaled (not closed) on every Synced
}

func newRecorder() *recorder {
	return &recorder{kv: map[string]string{}, notify: make(chan struct{}, 1)}
}

func (m *recorder) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	m.mu.Lock()
	m.kv = map[string]string{}
	for _, kv := range kvs {
		m.kv[string(kv.Key)] = string(kv.Value)
	}
	m.resets++
	n, hook := m.resets, m.onReset
	m.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

func (m *recorder) Put(kv *mvccpb.KeyValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[string(kv.Key)] = string(kv.Value)
}

func (m *recorder) Delete(kv *mvccpb.KeyValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(kv.Value) != 0 {
		panic("delete event with a value")
	}
	delete(m.kv, string(kv.Key))
}

func (m *recorder) Synced(rev int64) {
	m.mu.Lock()
	if rev < m.rev {
		panic(fmt.Sprintf("Synced went backwards: %d after %d", rev, m.rev))
	}
	m.rev = rev
	m.synced++
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

func (m *recorder) state() (map[string]string, int64, int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.kv), m.rev, m.resets, m.synced
}

// waitFor waits until cond holds for the mirror, checking on every Synced.
func (m *recorder) waitFor(t *testing.T, what string, cond func(kv map[string]string, rev int64, resets, synced int) bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		if cond(m.state()) {
			return
		}
		select {
		case <-m.notify:
		case <-deadline.C:
			kv, rev, resets, synced := m.state()
			t.Fatalf("timed out waiting for %s: %d keys, rev %d, %d resets, %d synced", what, len(kv), rev, resets, synced)
		}
	}
}

// waitConverged waits until the mirror has seen etcd's current revision and
// checks it equals etcd's listing of prefix.
func (m *recorder) waitConverged(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	want, rev := list(t, cli, prefix)
	m.waitFor(t, fmt.Sprintf("revision %d", rev), func(_ map[string]string, r int64, _, _ int) bool { return r >= rev })
	got, _, _, _ := m.state()
	if !maps.Equal(got, want) {
		t.Fatalf("mirror differs from etcd at revision %d:\n got %v\nwant %v", rev, got, want)
	}
}

func list(t *testing.T, cli *clientv3.Client, prefix string) (map[string]string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, resp.Header.Revision
}

// runSync starts Sync and stops it (checking that it returns) when the test
// ends.
func runSync(t *testing.T, cfg SyncConfig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sync(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Sync returned %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Sync did not return within 10s of cancel")
		}
	})
}

func put(t *testing.T, cli *clientv3.Client, k, v string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Put(ctx, k, v)
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	return resp.Header.Revision
}

func del(t *testing.T, cli *clientv3.Client, k string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, k); err != nil {
		t.Fatalf("delete %s: %v", k, err)
	}
}

func TestSyncRejectsIncompleteConfig(t *testing.T) {
	for _, cfg := range []SyncConfig{{}, {Prefix: "/p/", Handler: newRecorder()}} {
		if err := Sync(context.Background(), cfg); err == nil {
			t.Fatalf("Sync(%+v) = nil, want an error", cfg)
		}
	}
}

func TestSyncInitialListingAndEvents(t *testing.T) {
	_, cli := etcdtest.Start(t)
	const prefix = "/t/"
	for i := range 25 {
		put(t, cli, fmt.Sprintf("%sk%02d", prefix, i), fmt.Sprint(i))
	}
	put(t, cli, "/other/x", "not mirrored")
	m := newRecorder()
	// PageSize 4: the listing takes several pages at one revision.
	runSync(t, SyncConfig{Client: cli, Prefix: prefix, Handler: m, PageSize: 4, ProgressInterval: 100 * time.Millisecond})
	m.waitConverged(t, cli, prefix)
	if _, _, resets, _ := m.state(); resets != 1 {
		t.Fatalf("%d resets, want 1", resets)
	}

	put(t, cli, prefix+"k00", "changed")
	put(t, cli, prefix+"new", "n")
	del(t, cli, prefix+"k01")
	m.waitConverged(t, cli, prefix)
	kv, _, _, _ := m.state()
	if kv[prefix+"k00"] != "changed" || kv[prefix+"new"] != "n" || len(kv) != 25 {
		t.Fatalf("unexpected mirror: %v", kv)
	}
	if _, ok := kv["/other/x"]; ok {
		t.Fatal("key outside the prefix mirrored")
	}
}

// TestSyncNoGapBetweenListAndWatch writes keys after the listing and before
// the watch starts (Reset blocks until the writes are done). A watch started
// at the current revision instead of listing+1 would miss them.
func TestSyncNoGapBetweenListAndWatch(t *testing.T) {
	_, cli := etcdtest.Start(t)
	const prefix = "/gap/"
	for i := range 40 {
		put(t, cli, fmt.Sprintf("%spre%02d", prefix, i), "v")
	}
	m := newRecorder()
	m.onReset = func(n int) {
		if n != 1 {
			return
		}
		// Runs on Sync's goroutine: report with Errorf, not Fatalf.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := range 30 {
			if _, err := cli.Put(ctx, fmt.Sprintf("%sgap%02d", prefix, i), "v"); err != nil {
				t.Errorf("put during Reset: %v", err)
				return
			}
			if i%3 != 0 {
				continue
			}
			if _, err := cli.Delete(ctx, fmt.Sprintf("%spre%02d", prefix, i)); err != nil {
				t.Errorf("delete during Reset: %v", err)
				return
			}
		}
	}
	// Concurrent writers during the (paged) listing as well.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil && i < 200; i++ {
			if _, err := cli.Put(ctx, fmt.Sprintf("%sw%03d", prefix, i), "w"); err != nil && ctx.Err() == nil {
				t.Errorf("concurrent put: %v", err)
				return
			}
		}
	}()
	runSync(t, SyncConfig{Client: cli, Prefix: prefix, Handler: m, PageSize: 3, ProgressInterval: 100 * time.Millisecond})
	wg.Wait()
	cancel()
	m.waitConverged(t, cli, prefix)
	kv, _, resets, _ := m.state()
	if resets != 1 {
		t.Fatalf("%d resets, want 1", resets)
	}
	if _, ok := kv[prefix+"gap29"]; !ok {
		t.Fatal("key written between listing and watch is missing")
	}
}

// TestSyncProgressAdvancesWithoutEvents: writes outside the prefix raise
// etcd's revision; only progress notifications can tell the handler that
// its view is current at that revision.
func TestSyncProgressAdvancesWithoutEvents(t *testing.T) {
	_, cli := etcdtest.Start(t)
	m := newRecorder()
	runSync(t, SyncConfig{Client: cli, Prefix: "/quiet/", Handler: m, ProgressInterval: 50 * time.Millisecond})
	m.waitFor(t, "first sync", func(_ map[string]string, rev int64, _, _ int) bool { return rev > 0 })
	rev := put(t, cli, "/elsewhere", "x")
	m.waitFor(t, fmt.Sprintf("progress to revision %d", rev), func(_ map[string]string, r int64, _, _ int) bool { return r >= rev })
	_, _, _, before := m.state()
	m.waitFor(t, "more progress confirmations", func(_ map[string]string, _ int64, _, n int) bool { return n >= before+3 })
	if kv, _, resets, _ := m.state(); len(kv) != 0 || resets != 1 {
		t.Fatalf("quiet prefix: %d keys, %d resets", len(kv), resets)
	}
}

// TestSyncIdleClusterIsNotStalled: with no write at all after the listing,
// etcd never answers progress requests (its revision stays below the watch's
// start revision); the watch must still count as current, not stalled.
func TestSyncIdleClusterIsNotStalled(t *testing.T) {
	_, cli := etcdtest.Start(t)
	m := newRecorder()
	var resyncs atomic.Int32
	runSync(t, SyncConfig{Client: cli, Prefix: "/idle/", Handler: m, ProgressInterval: 20 * time.Millisecond,
		OnResync: func(string) { resyncs.Add(1) }})
	m.waitFor(t, "first sync", func(_ map[string]string, rev int64, _, _ int) bool { return rev > 0 })
	// Many times the stall threshold (3 silent intervals) of confirmations.
	m.waitFor(t, "15 confirmations on an idle cluster", func(_ map[string]string, _ int64, _, n int) bool { return n >= 16 })
	if _, _, resets, _ := m.state(); resets != 1 || resyncs.Load() != 0 {
		t.Fatalf("idle cluster: %d listings, %d resyncs; want 1 and 0", resets, resyncs.Load())
	}
}

func TestSyncStopsOnCancel(t *testing.T) {
	_, cli := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := newRecorder()
	done := make(chan error, 1)
	go func() { done <- Sync(ctx, SyncConfig{Client: cli, Prefix: "/c/", Handler: m}) }()
	m.waitFor(t, "first sync", func(_ map[string]string, rev int64, _, _ int) bool { return rev > 0 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Sync = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sync did not return after cancel")
	}
}
