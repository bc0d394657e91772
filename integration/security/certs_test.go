package security

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/devcert"
)

func newCA(t *testing.T, name string) *devcert.CA {
	t.Helper()
	ca, err := devcert.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// serverFiles writes a server certificate for 127.0.0.1 signed by ca, its
// key and (if clientCA is set) a client CA file into dir.
func serverFiles(t *testing.T, dir string, ca *devcert.CA, clientCA *devcert.CA) (cert, key, cafile string) {
	t.Helper()
	c, k, err := ca.Issue(pkix.Name{CommonName: "kproxy"}, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	writeFile(t, key, k) // key first: a reload between the writes fails and keeps the old pair
	writeFile(t, cert, c)
	if clientCA != nil {
		cafile = filepath.Join(dir, "clients.pem")
		writeFile(t, cafile, clientCA.PEM)
	}
	return cert, key, cafile
}

// writeFile replaces path atomically, as certificate managers do.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func clientCert(t *testing.T, ca *devcert.CA, cn string) tls.Certificate {
	t.Helper()
	c, k, err := ca.Issue(pkix.Name{CommonName: cn, OrganizationalUnit: []string{"clients"}})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func ioReadFull(c net.Conn, b []byte) (int, error) { return io.ReadFull(c, b) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
