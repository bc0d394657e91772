// Package authz tests authorization end to end: a real embedded etcd,
// stub brokers and proxies in one process, driven by real Kafka clients.
package authz

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

func startCluster(t *testing.T, proxies int, az authz.Config, adjust ...func(i int, cfg *assembly.Config)) *devcluster.Cluster {
	t.Helper()
	cfg := devcluster.Config{Brokers: 2, Proxies: proxies, StoreMemory: true, AutoCreateTopics: true, Authz: az}
	if len(adjust) > 0 {
		cfg.ProxyConfig = adjust[0]
	}
	return devtest.Start(t, cfg)
}

func newClient(t *testing.T, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo client for %s: %v", bootstrap, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t *testing.T, bootstrap string, opts ...kgo.Opt) *kadm.Client {
	return kadm.NewClient(newClient(t, bootstrap, opts...))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// within calls fn until it returns nil, failing the test if that takes
// longer than d (propagation bounds: a change in etcd must be enforced by
// every proxy within d).
func within(t *testing.T, d time.Duration, what string, fn func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := fn()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
