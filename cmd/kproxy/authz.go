package main

import (
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/authz"
	"github.com/kproxy/kproxy/proxy/principal"
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
