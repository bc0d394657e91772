package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/principal"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// securityFlags are the TLS, SASL and audit settings of `kproxy serve`.
func securityFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("tls-cert-file", "", "PEM certificate chain of the SSL and SASL_SSL listeners (reloaded when it changes)"),
		stringFlag("tls-key-file", "", "PEM private key of --tls-cert-file"),
		stringFlag("tls-client-ca-file", "", "PEM CAs that client certificates must chain to"),
		stringFlag("tls-client-auth", "none", "client certificates on TLS listeners: none, request or required"),
		durationFlag("tls-reload-interval", 10*time.Second, "how often the TLS files are checked for changes"),
		stringFlag("ssl-principal-mapping-rules", "DEFAULT", "Kafka's rules mapping a client certificate subject to a principal: RULE:pattern/replacement/[LU],...,DEFAULT"),
		durationFlag("auth-handshake-timeout", 10*time.Second, "time a client has for the TLS handshake and, on SASL listeners, to authenticate"),
		stringFlag("super-users", "", "principals that bypass authorization and may manage SCRAM credentials through the Kafka API, e.g. User:admin (empty: with --authorizer allow-all, anyone may manage credentials)"),
		stringFlag("super-user-credentials-file", "", "file holding the password of the first user of --super-users, given SCRAM credentials at startup unless it has some"),
		stringFlag("audit-log", "", "write security audit events as JSON lines to this file (- for standard error; empty: off)"),
	}
}

// withTLS gives the TLS listeners their reloading certificate.
func withTLS(c *cli.Context, ls []listener.Listener) ([]listener.Listener, error) {
	need := false
	for _, l := range ls {
		need = need || l.Protocol.TLS()
	}
	if !need {
		if c.String("tls-cert-file") != "" {
			return nil, fmt.Errorf("--tls-cert-file is set but no listener uses TLS (see --listeners)")
		}
		return ls, nil
	}
	srv, err := tlsconf.New(tlsconf.Config{
		CertFile: c.String("tls-cert-file"), KeyFile: c.String("tls-key-file"),
		ClientCAFile: c.String("tls-client-ca-file"), ClientAuth: c.String("tls-client-auth"),
		ReloadInterval: c.Duration("tls-reload-interval"),
	})
	if err != nil {
		return nil, fmt.Errorf("TLS listeners: %w", err)
	}
	for i := range ls {
		if ls[i].Protocol.TLS() {
			ls[i].TLSFiles = srv
		}
	}
	return ls, nil
}

func securityFromFlags(c *cli.Context, log *slog.Logger) (listener.Security, error) {
	mapper, err := tlsconf.ParseRules(c.String("ssl-principal-mapping-rules"))
	if err != nil {
		return listener.Security{}, fmt.Errorf("--ssl-principal-mapping-rules: %w", err)
	}
	sec := listener.Security{PrincipalMapper: mapper, HandshakeTimeout: c.Duration("auth-handshake-timeout")}
	if sec.SuperUsers, err = parsePrincipals(c.String("super-users")); err != nil {
		return listener.Security{}, fmt.Errorf("--super-users: %w", err)
	}
	if path := c.String("audit-log"); path != "" {
		if sec.Audit, err = audit.Open(path); err != nil {
			return listener.Security{}, err
		}
	}
	if sec.SASL, err = saslFromFlags(c, log, &sec.Runners); err != nil {
		return listener.Security{}, err
	}
	return sec, nil
}

func parsePrincipals(s string) ([]principal.Principal, error) {
	var out []principal.Principal
	for _, e := range commalist.Split(s) {
		typ, name, ok := strings.Cut(e, ":")
		if !ok || typ != "User" || name == "" {
			return nil, fmt.Errorf("%q: want User:NAME", e)
		}
		out = append(out, principal.User(name))
	}
	return out, nil
}

// runner adapts a Run method to listener.Security.Runners.
type runner = func(ctx context.Context) error
