package adminauth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/proxy/admin"
	"github.com/kproxy/kproxy/proxy/security/adminauth"
	"github.com/kproxy/kproxy/routing"
)

// startEndpoint serves the admin endpoint protected by sec on 127.0.0.1
// until the test ends.
func startEndpoint(t *testing.T, pprof bool, sec adminauth.Config) *admin.Endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := admin.New(admin.Config{
		Routes: routing.NewTable(), Status: func() leasewatch.Status { return leasewatch.Status{} },
		Draining: func() bool { return false }, Registry: prometheus.NewRegistry(),
		EnablePprof: pprof, Security: sec, Logger: slog.New(slog.DiscardHandler),
	}, ln)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ep.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("admin endpoint did not stop within 10s")
		}
	})
	return ep
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, c *http.Client, url, token string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestAdminBearerToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "token", []byte("tok-123\n"))
	for _, protectAll := range []bool{false, true} {
		ts := startEndpoint(t, true, adminauth.Config{TokenFile: tokenFile, ProtectAll: protectAll})
		base := "http://" + ts.Addr()
		open := http.StatusOK
		if protectAll {
			open = http.StatusUnauthorized
		}
		for _, tc := range []struct {
			path, token string
			want        int
		}{
			{"/healthz", "", open},
			{"/metrics", "", open},
			{"/v1/routes", "", http.StatusUnauthorized},
			{"/v1/routes", "wrong", http.StatusUnauthorized},
			{"/v1/routes", "tok-123", http.StatusOK},
			{"/debug/pprof/", "", http.StatusUnauthorized},
			{"/debug/pprof/", "tok-123", http.StatusOK},
			{"/metrics", "tok-123", http.StatusOK},
		} {
			got, err := get(t, http.DefaultClient, base+tc.path, tc.token)
			if err != nil || got != tc.want {
				t.Errorf("protectAll=%v %s token %q: %d %v, want %d", protectAll, tc.path, tc.token, got, err, tc.want)
			}
		}
	}
}

func TestAdminTLSWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcert.NewCA("admin CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	sc, sk, err := ca.Issue(pkix.Name{CommonName: "proxy"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ts := startEndpoint(t, false, adminauth.Config{
		CertFile: writeFile(t, dir, "cert.pem", sc), KeyFile: writeFile(t, dir, "key.pem", sk),
		ClientCAFile: writeFile(t, dir, "ca.pem", ca.PEM),
	})
	client := func(signer *devcert.CA, force ...bool) *http.Client {
		tc := &tls.Config{RootCAs: ca.Pool()}
		if signer != nil {
			cc, ck, err := signer.Issue(pkix.Name{CommonName: "operator"})
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(cc, ck)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
			if len(force) > 0 { // send it even though the server names other CAs
				tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	}
	base := "https://" + ts.Addr()
	if code, err := get(t, http.DefaultClient, "http://"+ts.Addr()+"/healthz", ""); err == nil && code == http.StatusOK {
		t.Error("plain HTTP served on a TLS admin endpoint")
	}
	for _, tc := range []struct {
		name   string
		c      *http.Client
		path   string
		want   int
		failed bool // the TLS handshake fails
	}{
		{"no certificate, open path", client(nil), "/healthz", http.StatusOK, false},
		{"no certificate, protected path", client(nil), "/v1/routes", http.StatusUnauthorized, false},
		{"trusted certificate", client(ca), "/v1/routes", http.StatusOK, false},
		// The client offers only certificates of the CAs the server names,
		// so this one is not sent at all.
		{"certificate of another CA", client(other), "/v1/routes", http.StatusUnauthorized, false},
		{"certificate of another CA, sent anyway", client(other, true), "/v1/routes", 0, true},
	} {
		got, err := get(t, tc.c, base+tc.path, "")
		if tc.failed != (err != nil) || got != tc.want {
			t.Errorf("%s: %d %v, want %d (handshake fails: %v)", tc.name, got, err, tc.want, tc.failed)
		}
	}
}
