package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// sslCluster runs a proxy with one SSL listener serving the files in dir.
func sslCluster(t *testing.T, files tlsconf.Config, rules string, auditTo *testrig.SyncBuffer) (*assembly.Proxy, *tlsconf.Server) {
	t.Helper()
	files.ReloadInterval = 50 * time.Millisecond
	srv, err := tlsconf.New(files)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := tlsconf.ParseRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, func(_ int, cfg *assembly.Config) {
		cfg.Listeners = []listener.Listener{{Name: "SSL", Protocol: listener.SSL, Addr: "127.0.0.1:0", TLSFiles: srv}}
		cfg.Security.PrincipalMapper = mapper
		if auditTo != nil {
			cfg.Security.Audit = audit.New(auditTo)
		}
	})
	return c.Proxy(0), srv
}

func TestMutualTLSPrincipalAndRefusals(t *testing.T) {
	dir := t.TempDir()
	ca, clients, other := newCA(t, "server CA"), newCA(t, "client CA"), newCA(t, "other CA")
	cert, key, cafile := serverFiles(t, dir, ca, clients)
	var log testrig.SyncBuffer
	p, _ := sslCluster(t, tlsconf.Config{CertFile: cert, KeyFile: key, ClientCAFile: cafile, ClientAuth: "required"},
		`RULE:^CN=([^,]+),OU=clients$/$1/L,DEFAULT`, &log)
	addr := p.ListenerAddr("SSL")

	ctx := testContext(t, 30*time.Second)
	good := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert(t, clients, "Alice")}}
	cl := newClient(t, addr, kgo.DialTLSConfig(good), kgo.DefaultProduceTopic("mtls"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce with a client certificate: %v", err)
	}
	if !strings.Contains(log.String(), `"principal":"User:alice"`) {
		t.Errorf("audit log names no User:alice (mapped from CN=Alice):\n%s", log.String())
	}

	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			t.Skip("kcat is not on PATH: run scripts/install-clients.sh")
		}
		props := kcatTLSProps(t, ca, clients, "Kcat-User")
		kcatRoundTrip(t, addr, props)
		if !strings.Contains(log.String(), `"principal":"User:kcat-user"`) {
			t.Errorf("audit log names no User:kcat-user:\n%s", log.String())
		}
		cmd := exec.Command("kcat", "-F", kcatTLSProps(t, ca, other, "mallory"), "-b", addr, "-L", "-m", "3")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("kcat with a certificate from another CA listed metadata:\n%s", out)
		}
	})

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"certificate from another CA", []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert(t, other, "mallory")}})}},
		{"no client certificate", []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()})}},
		{"plaintext client", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 10*time.Second)
			cl := newClient(t, addr, append(tc.opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
			if err := cl.Ping(ctx); err == nil {
				t.Fatal("ping succeeded; want the connection refused")
			}
		})
	}
}

// TestCertificateRotation replaces the certificate files while a producer
// runs: new connections get the new certificate, the producer sees no
// error, and no established connection is dropped.
func TestCertificateRotation(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newCA(t, "CA one"), newCA(t, "CA two")
	cert, key, _ := serverFiles(t, dir, ca1, nil)
	p, _ := sslCluster(t, tlsconf.Config{CertFile: cert, KeyFile: key}, "", nil)
	addr := p.ListenerAddr("SSL")
	roots := ca1.Pool()
	roots.AddCert(ca2.Cert)

	ctx := testContext(t, 60*time.Second)
	conns := &connHook{}
	cl := newClient(t, addr, kgo.DialTLSConfig(&tls.Config{RootCAs: roots}), kgo.DefaultProduceTopic("rotate"), kgo.AllowAutoTopicCreation(),
		kgo.WithHooks(conns), kgo.ConnIdleTimeout(10*time.Minute)) // kgo's own idle reaping is not a drop
	var produced, failed atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				failed.Add(1)
				t.Errorf("produce during rotation: %v", err)
				return
			}
			produced.Add(1)
		}
	}()
	waitFor(t, 20*time.Second, "first records", func() bool { return produced.Load() >= 10 })
	if got := issuer(t, addr, roots); got != "CA one" {
		t.Fatalf("certificate before rotation issued by %q", got)
	}
	serverFiles(t, dir, ca2, nil)
	waitFor(t, 10*time.Second, "the new certificate on new connections", func() bool { return issuer(t, addr, roots) == "CA two" })
	before := produced.Load()
	waitFor(t, 20*time.Second, "records after rotation", func() bool { return produced.Load() >= before+10 })
	close(stop)
	<-done
	if failed.Load() != 0 {
		t.Fatalf("%d produce errors during rotation", failed.Load())
	}
	if n := conns.disconnects.Load(); n != 0 {
		t.Fatalf("%d client connections dropped across the rotation; want none", n)
	}
}

// connHook counts a kgo client's broker disconnects.
type connHook struct{ disconnects atomic.Int64 }

var _ kgo.HookBrokerDisconnect = (*connHook)(nil) // kgo ignores a hook whose method does not match

func (h *connHook) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }

func issuer(t *testing.T, addr string, _ any) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the served certificate
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kcatTLSProps writes a librdkafka properties file for an SSL client whose
// certificate (CN=cn) is signed by clientCA.
func kcatTLSProps(t *testing.T, serverCA, clientCA *devcert.CA, cn string) string {
	t.Helper()
	dir := t.TempDir()
	c, k, err := clientCA.Issue(pkix.Name{CommonName: cn, OrganizationalUnit: []string{"clients"}})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.pem": serverCA.PEM, "client.pem": c, "client.key": k}
	for name, b := range files {
		writeFile(t, filepath.Join(dir, name), b)
	}
	props := filepath.Join(dir, "client.properties")
	writeFile(t, props, []byte("security.protocol=SSL\nssl.ca.location="+filepath.Join(dir, "ca.pem")+
		"\nssl.certificate.location="+filepath.Join(dir, "client.pem")+"\nssl.key.location="+filepath.Join(dir, "client.key")+"\n"))
	return props
}
