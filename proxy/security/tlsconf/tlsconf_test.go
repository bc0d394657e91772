package tlsconf

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/internal/devcert"
)

// TestReloadKeepsLastGood: a change that does not load (a key that does
// not match the certificate, as between two writes) keeps serving the last
// good pair; a good change is served to the next handshake.
func TestReloadKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcert.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(cn string) ([]byte, []byte) {
		c, k, err := ca.Issue(pkix.Name{CommonName: cn}, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	c1, k1 := issue("one")
	write("c.pem", c1)
	write("k.pem", k1)
	s, err := New(Config{CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "k.pem")})
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		cfg, err := s.TLSConfig().GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MinVersion != tls.VersionTLS12 {
			t.Fatalf("MinVersion %x", cfg.MinVersion)
		}
		return cfg.Certificates[0].Leaf.Subject.CommonName
	}
	if changed, err := s.Reload(); changed || err != nil {
		t.Fatalf("reload of unchanged files: %v, %v", changed, err)
	}
	c2, k2 := issue("two")
	write("c.pem", c2) // key not yet replaced
	if _, err := s.Reload(); err == nil {
		t.Fatal("mismatched key accepted")
	}
	if got := served(); got != "one" {
		t.Fatalf("after a failed reload serving %q, want one", got)
	}
	write("k.pem", k2)
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	if got := served(); got != "two" {
		t.Fatalf("serving %q, want two", got)
	}
	if _, err := New(Config{CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "k.pem"), ClientAuth: "required"}); err == nil {
		t.Fatal("client auth without a CA file accepted")
	}
}
