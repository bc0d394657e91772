package proxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// AdminSecurity protects the admin HTTP endpoint. The zero value serves
// plain HTTP to anyone, as before.
type AdminSecurity struct {
	// CertFile and KeyFile, if set, make the endpoint serve HTTPS.
	CertFile, KeyFile string
	// ClientCAFile: a client certificate chaining to these CAs is accepted
	// in place of the token. Certificates are requested, not required, so
	// that scrapers without one still reach the open paths.
	ClientCAFile string
	// TokenFile holds a bearer token that /v1/* and /debug/* require
	// ("Authorization: Bearer <token>").
	TokenFile string
	// ProtectAll extends the requirement to /metrics, /healthz and
	// /readyz, which otherwise stay open for scrapers and probes.
	ProtectAll bool
}

// openPaths answer without credentials unless ProtectAll is set.
var openPaths = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// secureAdmin applies cfg.Admin to the admin listener and handler; it is a
// no-op for the zero value.
func (s *Server) secureAdmin() error {
	a := s.cfg.Admin
	if (a.CertFile == "") != (a.KeyFile == "") {
		return fmt.Errorf("proxy: admin TLS needs both a certificate and a key file")
	}
	if a.ClientCAFile != "" && a.CertFile == "" {
		return fmt.Errorf("proxy: admin client certificates need admin TLS")
	}
	var token []byte
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return fmt.Errorf("proxy: admin token: %w", err)
		}
		if token = bytes.TrimSpace(b); len(token) == 0 {
			return fmt.Errorf("proxy: admin token file %s is empty", a.TokenFile)
		}
	}
	if a.CertFile != "" {
		tc, err := s.adminTLS(a)
		if err != nil {
			return err
		}
		s.adminLn = tls.NewListener(s.adminLn, tc)
	}
	if token != nil || a.ClientCAFile != "" {
		s.http.Handler = requireCredentials(s.http.Handler, token, a.ProtectAll)
	}
	return nil
}

// adminTLS serves the admin endpoint's files through tlsconf, which
// reloads them when they change (Server.Run runs its checks).
func (s *Server) adminTLS(a AdminSecurity) (*tls.Config, error) {
	auth := tlsconf.ClientAuthNone
	if a.ClientCAFile != "" {
		auth = tlsconf.ClientAuthRequest // a certificate sent must verify; none is fine
	}
	ts, err := tlsconf.New(tlsconf.Config{
		CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.ClientCAFile, ClientAuth: auth,
		Logger: s.log.With("component", "admin-tls"),
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: admin TLS: %w", err)
	}
	s.adminCerts = ts
	return ts.TLSConfig(), nil
}

// requireCredentials lets a request through if it is for an open path, has
// a verified client certificate, or carries the bearer token (compared in
// constant time; token nil: tokens are not accepted).
func requireCredentials(next http.Handler, token []byte, protectAll bool) http.Handler {
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !protectAll && openPaths[r.URL.Path]:
		case r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		case token != nil && bearerMatches(r, want):
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="kproxy admin"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearerMatches(r *http.Request, want [sha256.Size]byte) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}
