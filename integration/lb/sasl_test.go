package lb

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/proxyproto"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// oneUser is a credential store of one SCRAM-SHA-512 user.
type oneUser struct {
	name string
	cred xscram.StoredCredentials
}

func (u oneUser) SCRAM(mech, user string) (xscram.StoredCredentials, bool) {
	return u.cred, mech == sasl.ScramSHA512 && user == u.name
}

// newUser is a store of one SCRAM-SHA-512 user with password.
func newUser(t *testing.T, name, password string) oneUser {
	t.Helper()
	salt := make([]byte, 16)
	rand.Read(salt)
	cred, err := sasl.FromPassword(sasl.ScramSHA512, password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return oneUser{name, cred}
}

// TestSASLSSLBehindHAProxy: SASL_SSL listeners behind HAProxy with
// send-proxy-v2 (the header before the TLS handshake) serve kgo and kcat,
// and the authentication audit names the client's own address.
func TestSASLSSLBehindHAProxy(t *testing.T) {
	haproxyPath(t)
	dir := t.TempDir()
	ca, files, err := devcert.WriteServerFiles(dir, "kproxy", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := tlsconf.New(tlsconf.Config{CertFile: files.Cert, KeyFile: files.Key})
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := testrig.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	front, backends := addrs[0], addrs[1:]
	auditLog := &testrig.SyncBuffer{}
	alice := newUser(t, "alice", "alice-secret")
	devtest.Start(t, devcluster.Config{
		Brokers: 1, Proxies: 2, StoreMemory: true, AutoCreateTopics: true, ProxyListen: backends,
		ProxyConfig: func(i int, cfg *assembly.Config) {
			cfg.Listeners = []listener.Listener{{
				Name: "SASL_SSL", Protocol: listener.SASLSSL, Addr: backends[i], Advertise: front, TLSFiles: srvTLS,
				ProxyProtocol: proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
			}}
			cfg.Security.SASL = &sasl.Config{Mechanisms: []string{sasl.ScramSHA512}, Credentials: alice}
			cfg.Security.HandshakeTimeout = 5 * time.Second
			cfg.Security.Audit = audit.New(auditLog)
		},
	})
	startHAProxy(t, front, "send-proxy-v2", backends)

	t.Run("kgo", func(t *testing.T) {
		mech := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
		dialTLS := func(ctx context.Context, network, host string) (net.Conn, error) {
			nc, err := dialerFrom(writer)(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return tls.Client(nc, tc), nil
		}
		cl := newClient(t, front, "", kgo.Dialer(dialTLS), kgo.SASL(mech), kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lb-sasl", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce over SASL_SSL through HAProxy: %v", err)
		}
		if !strings.Contains(auditLog.String(), `"`+writer+`:`) {
			t.Fatalf("authentication audit does not name %s:\n%s", writer, auditLog.String())
		}
	})
	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("kcat not installed (CI=true): run scripts/install-clients.sh")
			}
			t.Skip("kcat is not on PATH: run scripts/install-clients.sh")
		}
		props := filepath.Join(dir, "kcat.properties")
		conf := fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=alice-secret\nssl.ca.location=%s\n", files.CA)
		if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t)
		if _, err := testrig.Kcat(ctx, front, props, "a\nb\nc\n", "-P", "-t", "lb-kcat"); err != nil {
			t.Fatal(err)
		}
		got, err := testrig.Kcat(ctx, front, props, "", "-C", "-t", "lb-kcat", "-e", "-o", "beginning")
		if err != nil || len(strings.Fields(got)) != 3 {
			t.Fatalf("kcat -C read %q, want 3 records: %v", got, err)
		}
	})
}
