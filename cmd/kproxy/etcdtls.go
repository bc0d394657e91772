package main

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdPasswordEnv holds the etcd password when --etcd-password-file is not
// given. There is deliberately no password flag: a command line is visible
// to every user of the machine.
const etcdPasswordEnv = envPrefix + "ETCD_PASSWORD"

// etcdSecurityFlags are TLS and authentication toward etcd, shared by every
// command that talks to it.
func etcdSecurityFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("etcd-cacert", "", "PEM CAs that sign etcd's server certificate (https endpoints; default: the system pool)"),
		stringFlag("etcd-cert", "", "PEM client certificate presented to etcd (with --etcd-key)"),
		stringFlag("etcd-key", "", "PEM private key of --etcd-cert"),
		stringFlag("etcd-user", "", "etcd user, when the cluster has authentication enabled"),
		stringFlag("etcd-password-file", "", "file holding the password of --etcd-user (else $"+etcdPasswordEnv+")"),
	}
}

// etcdSecurity fills cfg's TLS and credentials from the flags. TLS is used
// when an endpoint is https or any TLS file is given.
func etcdSecurity(c *cli.Context, cfg *clientv3.Config) error {
	info := transport.TLSInfo{
		TrustedCAFile: c.String("etcd-cacert"), CertFile: c.String("etcd-cert"), KeyFile: c.String("etcd-key"),
		MinVersion: tls.VersionTLS12,
	}
	if (info.CertFile == "") != (info.KeyFile == "") {
		return fmt.Errorf("--etcd-cert and --etcd-key go together")
	}
	useTLS := info.TrustedCAFile != "" || info.CertFile != ""
	for _, e := range cfg.Endpoints {
		if strings.HasPrefix(e, "https://") {
			useTLS = true
		}
	}
	if useTLS {
		tc, err := info.ClientConfig()
		if err != nil {
			return fmt.Errorf("etcd TLS: %w", err)
		}
		cfg.TLS = tc
	}
	user := c.String("etcd-user")
	if user == "" {
		return nil
	}
	pw, err := secretFrom(c.String("etcd-password-file"), etcdPasswordEnv, "--etcd-password-file")
	if err != nil {
		return fmt.Errorf("--etcd-user: %w", err)
	}
	cfg.Username, cfg.Password = user, pw
	return nil
}
