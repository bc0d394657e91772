package proxy

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/internal/devcert"
)

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
		ts := startServer(t, Config{EnablePprof: true, Admin: AdminSecurity{TokenFile: tokenFile, ProtectAll: protectAll}}, newFakeDispatcher(false))
		base := "http://" + ts.AdminAddr()
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
	ts := startServer(t, Config{Admin: AdminSecurity{
		CertFile: writeFile(t, dir, "cert.pem", sc), KeyFile: writeFile(t, dir, "key.pem", sk),
		ClientCAFile: writeFile(t, dir, "ca.pem", ca.PEM),
	}}, newFakeDispatcher(false))
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
	base := "https://" + ts.AdminAddr()
	if code, err := get(t, http.DefaultClient, "http://"+ts.AdminAddr()+"/healthz", ""); err == nil && code == http.StatusOK {
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
