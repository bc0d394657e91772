package testrig

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartStack starts the soak's and the scale run's set-up with one
// broker and one proxy: etcd answers, the proxy accepts, the brokers and
// proxies logged where asked, and Close stops etcd and removes the data
// folder it was given none of.
func TestStartStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kproxy and runs three processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kproxy")
	if err := Build(ctx, "", Target{Pkg: KproxyPkg, Out: bin}); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	s, err := StartStack(ctx, StackConfig{Kproxy: bin, LogDir: logs, Brokers: 1, Proxies: 1,
		ProxyFlags: func(int) []string { return []string{"--log-level", "info"} }})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	if len(s.Cluster.Brokers) != 1 || len(s.Cluster.Proxies) != 1 {
		t.Fatalf("%d brokers, %d proxies; want 1 and 1", len(s.Cluster.Brokers), len(s.Cluster.Proxies))
	}
	if _, err := s.Client.Put(ctx, "/stack-test", "x"); err != nil {
		t.Fatalf("etcd at %s: %v", s.Endpoint, err)
	}
	if err := Ping(ctx, s.Cluster.Proxies[0].Addr); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	for _, name := range []string{"etcd.log", "broker-1.log", "proxy-1.log"} {
		if _, err := os.Stat(filepath.Join(logs, name)); err != nil {
			t.Errorf("no %s in the log folder: %v", name, err)
		}
	}
	data := s.tmpData
	s.Close()
	closed = true
	if s.Etcd.Running() {
		t.Error("etcd still runs after Close")
	}
	if data != "" {
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("etcd's tmpfs data %s is still there after Close (%v)", data, err)
		}
	}
}
