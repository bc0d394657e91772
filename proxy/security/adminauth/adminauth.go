// Package adminauth protects the admin HTTP endpoint: HTTPS from reloading
// certificate files, and a bearer token (compared in constant time) or a
// verified client certificate for the paths that need credentials.
//
// Its limit: it says who may reach the endpoint, not what the endpoint
// serves (package admin).
package adminauth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// Config protects the admin HTTP endpoint. The zero value serves plain
// HTTP to anyone, as before.
type Config struct {
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

// Secure applies a to the admin listener ln and its handler h; for the
// zero Config it returns them as they are. certs, when not nil, are the
// endpoint's certificate files: its Run reloads them and must run with the
// endpoint.
func Secure(a Config, ln net.Listener, h http.Handler, log *slog.Logger) (_ net.Listener, _ http.Handler, certs *tlsconf.Server, _ error) {
	if (a.CertFile == "") != (a.KeyFile == "") {
		return nil, nil, nil, fmt.Errorf("proxy: admin TLS needs both a certificate and a key file")
	}
	if a.ClientCAFile != "" && a.CertFile == "" {
		return nil, nil, nil, fmt.Errorf("proxy: admin client certificates need admin TLS")
	}
	var token []byte
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("proxy: admin token: %w", err)
		}
		if token = bytes.TrimSpace(b); len(token) == 0 {
			return nil, nil, nil, fmt.Errorf("proxy: admin token file %s is empty", a.TokenFile)
		}
	}
	if a.CertFile != "" {
		ts, err := adminTLS(a, log)
		if err != nil {
			return nil, nil, nil, err
		}
		certs, ln = ts, tls.NewListener(ln, ts.TLSConfig())
	}
	if token != nil || a.ClientCAFile != "" {
		h = requireCredentials(h, token, a.ProtectAll)
	}
	return ln, h, certs, nil
}

// adminTLS serves the admin endpoint's files through tlsconf, which
// reloads them when they change (its Run runs the checks).
func adminTLS(a Config, log *slog.Logger) (*tlsconf.Server, error) {
	auth := tlsconf.ClientAuthNone
	if a.ClientCAFile != "" {
		auth = tlsconf.ClientAuthRequest // a certificate sent must verify; none is fine
	}
	ts, err := tlsconf.New(tlsconf.Config{
		CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.ClientCAFile, ClientAuth: auth,
		Logger: log.With("component", "admin-tls"),
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: admin TLS: %w", err)
	}
	return ts, nil
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
