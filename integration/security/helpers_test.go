// Package security holds end-to-end tests of the proxy's listeners, TLS and
// SASL: a real embedded etcd, stub brokers and proxies in one process,
// driven by real Kafka clients.
package security

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/proxy/assembly"
)

// startCluster runs one broker and the given number of proxies, each
// configured by adjust.
func startCluster(t *testing.T, proxies int, adjust func(i int, cfg *assembly.Config)) *devcluster.Cluster {
	t.Helper()
	return devtest.Start(t, devcluster.Config{Brokers: 1, Proxies: proxies, StoreMemory: true, AutoCreateTopics: true, DefaultPartitions: 2, ProxyConfig: adjust})
}

// newClient is a kgo client that the test closes (integration's helper;
// test packages cannot share it).
func newClient(t *testing.T, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo client for %s: %v", bootstrap, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
