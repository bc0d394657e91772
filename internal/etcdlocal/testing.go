package etcdlocal

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StartForTest starts a server with a temporary data dir and returns a client
// for it; both are closed when the test ends.
func StartForTest(t testing.TB) (*Server, *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(s.Close)
	return s, NewClientForTest(t, s.Endpoint)
}

// NewClientForTest returns a client for endpoint, closed when the test ends.
func NewClientForTest(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
