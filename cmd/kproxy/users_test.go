package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/sasl"
)

// TestUsersCommand runs `kproxy users add|list|delete` against a real
// embedded etcd: the password comes from standard input and is stored only
// as SCRAM keys that verify it.
func TestUsersCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	etcd, err := etcdlocal.Start(ctx, etcdlocal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		app := newApp()
		app.Reader, app.Writer = strings.NewReader(stdin), &out
		err := app.RunContext(ctx, append([]string{"kproxy", "users", "--etcd-endpoints", etcd.Endpoint, "--etcd-prefix", "/t"}, args...))
		return out.String(), err
	}
	if _, err := run("s3cret-pass\n", "add", "alice"); err != nil {
		t.Fatalf("users add: %v", err)
	}
	if _, err := run("x\n", "add", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096", "bob"); err != nil {
		t.Fatalf("users add bob: %v", err)
	}
	if _, err := run("", "add", "carol"); err == nil {
		t.Error("users add with an empty password succeeded")
	}
	out, err := run("", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alice  SCRAM-SHA-256  8192", "alice  SCRAM-SHA-512  8192", "bob    SCRAM-SHA-256  4096"} {
		if !strings.Contains(out, want) {
			t.Errorf("users list lacks %q:\n%s", want, out)
		}
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/t/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if bytes.Contains(kv.Value, []byte("s3cret-pass")) {
			t.Fatalf("etcd key %s holds the password", kv.Key)
		}
	}
	store := credstore.New(cli, layout.New("/t"), nil)
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.Run(sctx) }()
	<-store.Synced()
	c, ok := store.SCRAM(sasl.ScramSHA512, "alice")
	if !ok {
		t.Fatal("alice has no SCRAM-SHA-512 credential in the store")
	}
	again, err := sasl.FromPassword(sasl.ScramSHA512, "s3cret-pass", []byte(c.Salt), c.Iters)
	if err != nil || !hmac.Equal(again.StoredKey, c.StoredKey) {
		t.Fatalf("stored key does not verify the password (%v)", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if _, err := run("", "delete", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("", "delete", "alice"); err == nil {
		t.Error("deleting a deleted user succeeded")
	}
	if out, _ := run("", "list"); strings.Contains(out, "alice") {
		t.Errorf("alice still listed:\n%s", out)
	}
}
