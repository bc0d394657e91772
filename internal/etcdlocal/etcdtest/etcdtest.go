// Package etcdtest starts etcdlocal's real embedded etcd for a test and
// gives it a client; both end with the test. Only tests import it, so that
// the product binary (which embeds etcdlocal for `kproxy dev`) does not
// link the testing package.
package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
)

// Start starts a server with a temporary data dir and returns a client for
// it; both are closed when the test ends.
func Start(t testing.TB) (*etcdlocal.Server, *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := etcdlocal.Start(ctx, etcdlocal.Config{UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(s.Close)
	return s, NewClient(t, s.Endpoint)
}

// NewClient returns a client for endpoint, closed when the test ends.
func NewClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
