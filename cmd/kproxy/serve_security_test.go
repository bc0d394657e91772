package main

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// TestServeSASLSSLFromFlags runs `kproxy serve` with Kafka-style listener
// flags, TLS files and a super user bootstrapped from a credentials file,
// and authenticates to it with kgo: the flags reach the proxy.
func TestServeSASLSSLFromFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := etcdlocal.Start(ctx, etcdlocal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	dir := t.TempDir()
	ca, err := devcert.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.Issue(pkix.Name{CommonName: "kproxy"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"server.pem": cert, "server.key": key, "admin.password": []byte("first-admin-pw\n")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addrs, err := testrig.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	secure := addrs[1]
	t.Setenv("KPROXY_SASL_MECHANISMS", "SCRAM-SHA-512") // settable from the environment too
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- newApp().RunContext(runCtx, []string{"kproxy", "serve", "--etcd-endpoints", etcd.Endpoint, "--log-level", "warn",
			"--listeners", "CLIENT://" + addrs[0] + ",SECURE://" + secure, "--listener-security-protocol-map", "CLIENT:PLAINTEXT,SECURE:SASL_SSL",
			"--admin", addrs[2], "--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
			"--super-users", "User:root", "--super-user-credentials-file", filepath.Join(dir, "admin.password"), "--authorizer", "deny-by-default"})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	login := func(pass string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()}),
			kgo.SASL(kscram.Auth{User: "root", Pass: pass}.AsSha512Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		return err
	}
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if lastErr = login("first-admin-pw"); lastErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("super user could not log in: %v", lastErr)
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := login("wrong"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestServeRefusesAllowAllWithAuthentication: a listener that
// authenticates clients with the default authorizer (allow-all) does not
// start, and says why; giving --authorizer allow-all explicitly gets past
// the check (to fail later here, on the missing TLS files).
func TestServeRefusesAllowAllWithAuthentication(t *testing.T) {
	base := []string{"kproxy", "serve", "--etcd-endpoints", "127.0.0.1:1", "--log-level", "error", "--admin", "127.0.0.1:0"}
	tests := []struct {
		name    string
		args    []string
		refused bool
	}{
		{"SASL_SSL next to PLAINTEXT", []string{"--listeners", "CLIENT://127.0.0.1:0,SECURE://127.0.0.1:0", "--listener-security-protocol-map", "CLIENT:PLAINTEXT,SECURE:SASL_SSL"}, true},
		{"SASL_PLAINTEXT", []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:0"}, true},
		{"mTLS", []string{"--listeners", "SSL://127.0.0.1:0", "--tls-client-auth", "required"}, true},
		{"SASL_SSL, allow-all given", []string{"--listeners", "SASL_SSL://127.0.0.1:0", "--authorizer", "allow-all"}, false},
		{"TLS without client certificates", []string{"--listeners", "SSL://127.0.0.1:0"}, false},
		{"SASL_SSL, deny-by-default", []string{"--listeners", "SASL_SSL://127.0.0.1:0", "--authorizer", "deny-by-default", "--super-users", "User:root"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := newApp().RunContext(ctx, append(slices.Clone(base), tt.args...))
			why := err != nil && strings.Contains(err.Error(), "authorizer is allow-all") && strings.Contains(err.Error(), "password")
			if why != tt.refused {
				t.Fatalf("serve %v: %v; want refused for allow-all: %v", tt.args, err, tt.refused)
			}
			if !tt.refused && err == nil {
				t.Fatalf("serve %v started without TLS files", tt.args)
			}
		})
	}
}
