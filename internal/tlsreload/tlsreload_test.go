package tlsreload

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/devcert"
)

func TestReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	write := func(name string) *devcert.CA {
		t.Helper()
		ca, err := devcert.NewCA(name)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := ca.Issue(pkix.Name{CommonName: name + " client"})
		if err != nil {
			t.Fatal(err)
		}
		for p, b := range map[string][]byte{caFile: ca.PEM, certFile: cert, keyFile: key} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return ca
	}
	write("first")
	now := time.Unix(1000, 0)
	c, err := New(Files{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, time.Second, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	subject := func() string {
		tc := c.Config("broker-1")
		if tc.ServerName != "broker-1" || len(tc.Certificates) != 1 {
			t.Fatalf("config: server name %q, %d certificates", tc.ServerName, len(tc.Certificates))
		}
		return tc.Certificates[0].Leaf.Subject.CommonName
	}
	if got := subject(); got != "first client" {
		t.Fatalf("client certificate %q", got)
	}

	write("second")
	later := time.Now().Add(time.Minute) // a modification time that surely differs
	for _, p := range []string{caFile, certFile, keyFile} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := subject(); got != "first client" {
		t.Fatalf("reloaded before the check interval: %q", got)
	}
	now = now.Add(time.Second)
	if got := subject(); got != "second client" {
		t.Fatalf("after the interval: client certificate %q", got)
	}

	if err := os.WriteFile(keyFile, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if got := subject(); got != "second client" || c.Err() == nil {
		t.Fatalf("a broken key file: certificate %q, err %v; want the last good one and an error", got, c.Err())
	}
}
