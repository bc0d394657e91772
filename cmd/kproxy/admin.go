package main

import (
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/security/adminauth"
)

// adminFlags protect the proxy's admin endpoint (adminauth.Config).
func adminFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("admin-tls-cert", "", "PEM certificate: the admin endpoint serves HTTPS (with --admin-tls-key)"),
		stringFlag("admin-tls-key", "", "PEM private key of --admin-tls-cert"),
		stringFlag("admin-tls-client-ca", "", "PEM CAs: a client certificate they sign may call /v1/* and /debug/*"),
		stringFlag("admin-token-file", "", "file holding the bearer token /v1/* and /debug/* require"),
		boolFlag("admin-auth-all", false, "require the token or certificate for /metrics, /healthz and /readyz too"),
	}
}

func adminSecurityFrom(c *cli.Context) adminauth.Config {
	return adminauth.Config{
		CertFile: c.String("admin-tls-cert"), KeyFile: c.String("admin-tls-key"),
		ClientCAFile: c.String("admin-tls-client-ca"), TokenFile: c.String("admin-token-file"),
		ProtectAll: c.Bool("admin-auth-all"),
	}
}
