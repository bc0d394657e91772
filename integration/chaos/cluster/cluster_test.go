package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// buildEtcdMember builds the etcdmember binary for this test.
func buildEtcdMember(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcdmember")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testrig.Build(ctx, "", testrig.Target{Pkg: testrig.EtcdMemberPkg, Out: bin}); err != nil {
		t.Fatalf("build etcdmember: %v", err)
	}
	return bin
}

// TestEtcdMembers starts three etcdmember processes, kills the leader with
// SIGKILL, checks that the others elect a new one and serve writes, restarts
// the old leader and compacts.
func TestEtcdMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{cfg: Config{Dir: dir, EtcdMember: buildEtcdMember(t), Kproxy: "unused"}}
	c.cfg, _ = c.cfg.withDefaults()
	c.log = c.cfg.Logger
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.startEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, "/kproxy/x", "1"); err != nil {
		t.Fatal(err)
	}
	leader, err := c.EtcdLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Members[leader].Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var next int
	for {
		next, err = c.EtcdLeader(ctx)
		if err == nil && next != leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new leader 30s after killing %d: %v", leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.cli.Put(pctx, "/kproxy/x", "2"); err != nil {
		t.Fatalf("write after leader kill: %v", err)
	}
	pcancel()
	if err := c.startMissingMembers(ctx); err != nil {
		t.Fatal(err)
	}
	rev, err := c.Compact(ctx)
	if err != nil || rev < 3 {
		t.Fatalf("compact: rev %d err %v", rev, err)
	}
}

// TestCountersAcrossRestarts: a counter that drops was reset by a restart,
// so the new value is added whole.
func TestCountersAcrossRestarts(t *testing.T) {
	k := &Counters{last: map[string]float64{}, totals: map[string]float64{}}
	var value float64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "kproxy_broker_commit_failures_total{reason=\"fenced\"} %v\n", value)
		fmt.Fprintf(w, "kproxy_broker_commit_failures_total{reason=\"other\"} 100\nkproxy_broker_owned_partitions 7\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, v := range []float64{2, 5, 1, 4} { // restart between 5 and 1
		value = v
		k.scrape(context.Background(), "broker", "broker-1", addr, "kproxy_")
	}
	if got := k.Fenced(); got != 9 { // 2 + 3 + 1 + 3
		t.Fatalf("fenced = %v, want 9", got)
	}
	totals, errs := k.Totals()
	if _, ok := totals["broker:kproxy_broker_owned_partitions"]; ok || errs != 0 {
		t.Fatalf("gauges must not be accumulated: %v (errors %d)", totals, errs)
	}
	k.scrape(context.Background(), "broker", "broker-1", "127.0.0.1:1", "kproxy_")
	if _, errs := k.Totals(); errs != 1 {
		t.Fatalf("failed scrape not counted")
	}
}

// TestMutationNeedsUnsafeBuild: a product kproxy is refused for a run with
// fencing disabled, before any process starts; the tagged build is accepted.
func TestMutationNeedsUnsafeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kproxy twice")
	}
	dir := t.TempDir()
	product, unsafe := filepath.Join(dir, "kproxy"), filepath.Join(dir, "kproxy-unsafe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := testrig.Build(ctx, "", testrig.Target{Pkg: testrig.KproxyPkg, Out: product},
		testrig.Target{Pkg: testrig.KproxyPkg, Out: unsafe, Tags: []string{testrig.UnsafeTag}})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkUnsafeBuild(ctx, product); err == nil || !strings.Contains(err.Error(), testrig.UnsafeTag) {
		t.Fatalf("product build: err = %v, want one naming -tags %s", err, testrig.UnsafeTag)
	}
	if err := checkUnsafeBuild(ctx, unsafe); err != nil {
		t.Fatalf("tagged build refused: %v", err)
	}
}
