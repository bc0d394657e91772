package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/listener"

	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// authzFlags configure authorization (docs/authorization.md); its super
// users are --super-users (securityFlags).
func authzFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("authorizer", "allow-all", "allow-all (every client may do everything: NOT for production), acl (bindings enforced; resources without any binding open) or deny-by-default (Kafka's default: no matching allow means denied)"),
		boolFlag("authorizer-dry-run", false, "compute, log and count authorization decisions without enforcing them"),
		intFlag("audit-allows-every", 0, "audit one in N allowed decisions (0: only denials are audited; see --audit-log)"),
	}
}

func authzConfig(c *cli.Context, super []principal.Principal) (authz.Config, error) {
	mode, err := authz.ParseMode(c.String("authorizer"))
	if err != nil {
		return authz.Config{}, err
	}
	cfg := authz.Config{Mode: mode, DryRun: c.Bool("authorizer-dry-run")}
	for _, p := range super {
		cfg.SuperUsers = append(cfg.SuperUsers, p.String())
	}
	return cfg, nil
}

// checkSecureAuthorizer refuses the default authorizer (allow-all) when a
// listener authenticates clients (SASL, or TLS with client certificates):
// with allow-all, anyone on another listener, and every authenticated
// user, may change any user's password (AlterUserScramCredentials), ACLs,
// quotas and topics, so authentication would protect nothing. Giving
// --authorizer allow-all explicitly accepts that.
func checkSecureAuthorizer(c *cli.Context, listeners []listener.Listener, mode authz.Mode) error {
	if mode != authz.AllowAll || c.IsSet("authorizer") {
		return nil
	}
	mtls := c.String("tls-client-auth") != "" && c.String("tls-client-auth") != "none"
	var secure []string
	for _, l := range listeners {
		if l.Protocol.SASL() || (l.Protocol.TLS() && mtls) {
			secure = append(secure, l.Name+" ("+string(l.Protocol)+")")
		}
	}
	if len(secure) == 0 {
		return nil
	}
	return fmt.Errorf("listener %s authenticates clients, but the authorizer is allow-all (the default): anyone on another listener, "+
		"and every authenticated user, could change any user's password, ACLs and topics; "+
		"give --authorizer deny-by-default with --super-users (see docs/security.md), or --authorizer allow-all to accept that",
		strings.Join(secure, ", "))
}
