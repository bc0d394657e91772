package main

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// tlsFiles writes a CA, a server certificate for 127.0.0.1 and a client
// certificate (subject CN) into dir and returns their paths.
type tlsFiles struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func writeTLSFiles(t *testing.T, dir, client string) tlsFiles {
	t.Helper()
	ca, err := devcert.NewCA("kproxy test CA")
	if err != nil {
		t.Fatal(err)
	}
	f := tlsFiles{ca: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem"),
		clientCert: filepath.Join(dir, "client.pem"), clientKey: filepath.Join(dir, "client-key.pem")}
	sc, sk, err := ca.Issue(pkix.Name{CommonName: "etcd"}, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cc, ck, err := ca.Issue(pkix.Name{CommonName: client})
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{f.ca: ca.PEM, f.serverCert: sc, f.serverKey: sk, f.clientCert: cc, f.clientKey: ck} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// enableAuth creates users root and kproxy (both with the root role) and
// turns etcd authentication on.
func enableAuth(t *testing.T, endpoint string, f tlsFiles, password string) {
	t.Helper()
	tc, err := transport.TLSInfo{TrustedCAFile: f.ca, CertFile: f.clientCert, KeyFile: f.clientKey}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, user := range []string{"root", "kproxy"} {
		if _, err := cli.UserAdd(ctx, user, password); err != nil {
			t.Fatalf("add etcd user %s: %v", user, err)
		}
		if _, err := cli.UserGrantRole(ctx, user, "root"); err != nil {
			t.Fatalf("grant root to %s: %v", user, err)
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatalf("enable etcd auth: %v", err)
	}
}

// TestEtcdTLSAndAuth runs a broker and a proxy, each through its own
// command's flags, against an embedded etcd that demands client
// certificates and passwords, and produces and consumes through them.
func TestEtcdTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	f := writeTLSFiles(t, dir, "kproxy")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := etcdlocal.Start(ctx, etcdlocal.Config{UnsafeNoFsync: true, TLS: &etcdlocal.TLS{CertFile: f.serverCert, KeyFile: f.serverKey, ClientCAFile: f.ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	if !strings.HasPrefix(etcd.Endpoint, "https://") {
		t.Fatalf("endpoint %s is not https", etcd.Endpoint)
	}
	const password = "s3cret-etcd"
	enableAuth(t, etcd.Endpoint, f, password)
	pwFile := filepath.Join(dir, "etcd-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	etcdArgs := []string{"--etcd-endpoints", etcd.Endpoint, "--etcd-cacert", f.ca, "--etcd-cert", f.clientCert, "--etcd-key", f.clientKey,
		"--etcd-user", "kproxy", "--etcd-password-file", pwFile, "--etcd-dial-timeout", "20s", "--log-level", "warn"}

	t.Run("refusals", func(t *testing.T) {
		badPW := filepath.Join(dir, "wrong")
		const wrong = "nope-7f3a"
		if err := os.WriteFile(badPW, []byte(wrong), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, args := range map[string][]string{
			"no client certificate": {"--etcd-endpoints", etcd.Endpoint, "--etcd-cacert", f.ca, "--etcd-user", "kproxy", "--etcd-password-file", pwFile, "--etcd-dial-timeout", "2s"},
			"wrong password":        {"--etcd-endpoints", etcd.Endpoint, "--etcd-cacert", f.ca, "--etcd-cert", f.clientCert, "--etcd-key", f.clientKey, "--etcd-user", "kproxy", "--etcd-password-file", badPW, "--etcd-dial-timeout", "2s"},
		} {
			err := runCommand(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, args...))
			if err == nil {
				t.Errorf("%s: serve started", name)
			} else if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), wrong) {
				t.Errorf("%s: error reveals the password: %v", name, err)
			}
		}
	})

	run, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 2)
	brokerAddr, proxyAddr, adminAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	go func() {
		done <- runCommand(run, append([]string{"broker", "--id", "1", "--listen", brokerAddr, "--store", "memory"}, etcdArgs...))
	}()
	// urfave/cli's flag parsing writes shared state: one command parses
	// at a time, so the proxy starts once the broker listens.
	waitDial(t, brokerAddr, done)
	go func() {
		done <- runCommand(run, append([]string{"serve", "--listen", proxyAddr, "--admin", adminAddr, "--default-partitions", "1"}, etcdArgs...))
	}()
	waitHTTP(t, "http://"+adminAddr+"/readyz", done)

	cl, err := kgo.NewClient(kgo.SeedBrokers(proxyAddr), kgo.DefaultProduceTopic("tls"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("tls"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce through a proxy on TLS etcd: %v", err)
	}
	fetches := cl.PollRecords(ctx, 1)
	if errs := fetches.Errors(); len(errs) > 0 || fetches.NumRecords() != 1 || string(fetches.Records()[0].Value) != "over tls" {
		t.Fatalf("consume: %d records, errors %v", fetches.NumRecords(), errs)
	}
	stop()
	for range 2 {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("command: %v", err)
		}
	}
}

func runCommand(ctx context.Context, args []string) error {
	app := newApp()
	app.Writer, app.ErrWriter = os.Stderr, os.Stderr
	app.ExitErrHandler = func(*cli.Context, error) {}
	return app.RunContext(ctx, append([]string{"kproxy"}, args...))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := testrig.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitDial waits until addr accepts connections, failing early if a
// command ended.
func waitDial(t *testing.T, addr string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("a command ended before %s listened: %v", addr, err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not listening within 30s", addr)
}

// waitHTTP waits for url to answer 200, failing early if a command ended.
func waitHTTP(t *testing.T, url string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("a command ended before the proxy was ready: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready within 30s", url)
}
