package compat

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// capSASL runs a client over the proxy's SASL_SSL listener.
const capSASL = "SASL_SSL SCRAM-SHA-512"

// saslRecords is how many records the SASL_SSL round trip writes and reads.
const saslRecords = 10

// secureTarget is a SASL_SSL listener of a target and a user of it.
type secureTarget struct {
	bootstrap  []string
	caFile     string // PEM of the CA that signed the listener's certificate
	tls        *tls.Config
	user, pass string
}

// sasl produces records over SASL_SSL with SCRAM-SHA-512 and reads them
// back as a consumer group member, with the client's own API.
func (h *harness) sasl(t *testing.T) (string, error) {
	st := h.tg.secure()
	if st == nil {
		return "the target has no SASL_SSL listener", errNotSupported
	}
	ctx, cancel := h.within(90 * time.Second)
	defer cancel()
	topic, err := h.topic(ctx, "sasl")
	if err != nil {
		return "", err
	}
	if err := h.d.saslRoundTrip(ctx, *st, topic, saslRecords); err != nil {
		return "", err
	}
	return "", nil // what passing means is in the capability's description
}

// devSecurity gives a devcluster proxy a SASL_SSL listener (certificate
// from a throwaway CA) whose users are the SCRAM credentials in etcd.
type devSecurity struct {
	dir   string
	files *tlsconf.Server
	ca    *devcert.CA
}

const (
	compatUser = "compat"
	compatPass = "compat-secret"
)

func newDevSecurity() (*devSecurity, error) {
	dir, err := os.MkdirTemp("", "kproxy-compat-sasl-")
	if err != nil {
		return nil, err
	}
	ca, f, err := devcert.WriteServerFiles(dir, "kproxy compat", "127.0.0.1", "localhost")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	files, err := tlsconf.New(tlsconf.Config{CertFile: f.Cert, KeyFile: f.Key})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &devSecurity{dir: dir, files: files, ca: ca}, nil
}

func (s *devSecurity) configure(_ int, cfg *assembly.Config) {
	cfg.Listeners = []listener.Listener{
		{Name: string(listener.Plaintext), Protocol: listener.Plaintext, Addr: cfg.Listen},
		{Name: string(listener.SASLSSL), Protocol: listener.SASLSSL, Addr: "127.0.0.1:0", TLSFiles: s.files},
	}
	cfg.Security.SASL = &sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256}}
}

// addUser stores the compat user's credentials, as `kproxy users add`.
func (s *devSecurity) addUser(ctx context.Context, cli *clientv3.Client) error {
	_, err := credstore.PutPassword(ctx, cli, layout.New(""), compatUser, compatPass, credstore.Mechanisms, credstore.MinIterations)
	return err
}

func (s *devSecurity) target(addr string) *secureTarget {
	return &secureTarget{
		bootstrap: []string{addr}, caFile: filepath.Join(s.dir, "ca.pem"),
		tls: &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12}, user: compatUser, pass: compatPass,
	}
}

func (s *devSecurity) close() { os.RemoveAll(s.dir) }
