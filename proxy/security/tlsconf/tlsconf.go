// Package tlsconf serves TLS for the proxy's listeners from certificate,
// key and client-CA files, and reloads them when their contents change:
// new handshakes use the new files, established connections keep theirs.
// A reload that fails (a half-written file, a key that does not match)
// keeps the last good configuration and is retried on the next poll.
//
// It also maps a client certificate's subject to a Kafka principal with
// Kafka's ssl.principal.mapping.rules (principal.go). TLS 1.2 is the floor.
package tlsconf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/internal/reload"
)

// Client authentication modes, as Kafka's ssl.client.auth names them.
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "required"
)

// Config names the files of one TLS server.
type Config struct {
	CertFile, KeyFile string // PEM certificate chain and its private key
	// ClientCAFile holds the PEM CAs client certificates must chain to;
	// required unless ClientAuth is none.
	ClientCAFile string
	// ClientAuth is none (default), request or required ("require" is
	// accepted too).
	ClientAuth string
	// ReloadInterval is how often the files are checked for changes
	// (default 10s).
	ReloadInterval time.Duration
	Logger         *slog.Logger
}

// Server holds the current TLS configuration.
type Server struct {
	cfg  Config
	auth tls.ClientAuthType
	cur  atomic.Pointer[tls.Config]

	mu  sync.Mutex // serializes reloads
	sum [sha256.Size]byte
}

// New loads the files once; an error means they are unusable.
func New(cfg Config) (*Server, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("tlsconf: certificate and key files are required")
	}
	auth, err := parseClientAuth(cfg.ClientAuth)
	if err != nil {
		return nil, err
	}
	if auth != tls.NoClientCert && cfg.ClientCAFile == "" {
		return nil, fmt.Errorf("tlsconf: client auth %q needs a client CA file", cfg.ClientAuth)
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, auth: auth}
	if _, err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

func parseClientAuth(s string) (tls.ClientAuthType, error) {
	switch s {
	case "", ClientAuthNone:
		return tls.NoClientCert, nil
	case ClientAuthRequest:
		// Like Kafka's "requested": a certificate that is sent must verify.
		return tls.VerifyClientCertIfGiven, nil
	case ClientAuthRequire, "require":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("tlsconf: client auth %q: want none, request or required", s)
}

// TLSConfig is the configuration to serve with: each handshake takes the
// files' current version.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
}

// Run checks the files every ReloadInterval until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	reload.Every(ctx, s.cfg.ReloadInterval, s.cfg.Logger.With("cert", s.cfg.CertFile), "TLS certificate", s.Reload)
	return nil
}

// Reload reads the files and, if their contents changed and they load,
// serves them to new handshakes. It reports whether it changed anything.
func (s *Server) Reload() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	files := []string{s.cfg.CertFile, s.cfg.KeyFile}
	if s.cfg.ClientCAFile != "" {
		files = append(files, s.cfg.ClientCAFile)
	}
	var raw [3][]byte
	h := sha256.New()
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, fmt.Errorf("tlsconf: read %s: %w", f, err)
		}
		raw[i] = b
		h.Write(b)
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if s.cur.Load() != nil && bytes.Equal(sum[:], s.sum[:]) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(raw[0], raw[1])
	if err != nil {
		return false, fmt.Errorf("tlsconf: certificate %s with key %s: %w", s.cfg.CertFile, s.cfg.KeyFile, err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: s.auth}
	if raw[2] != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw[2]) {
			return false, fmt.Errorf("tlsconf: client CA file %s holds no PEM certificate", s.cfg.ClientCAFile)
		}
		c.ClientCAs = pool
	}
	s.cur.Store(c)
	s.sum = sum
	return true, nil
}
