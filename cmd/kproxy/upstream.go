package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/tlsreload"
)

// upstreamPasswordEnv holds the brokers' SASL password when
// --upstream-sasl-password-file is not given (there is no password flag).
const upstreamPasswordEnv = envPrefix + "UPSTREAM_SASL_PASSWORD"

// upstreamFlags configure the proxy's connections to brokers.
func upstreamFlags() []cli.Flag {
	return []cli.Flag{
		intFlag("upstream-max-conns-per-broker", 256, "connections per broker that answers one request per connection at a time (Kafka, KafScale), opened on demand: one per client connection with requests outstanding; at the limit requests wait for one"),
		durationFlag("upstream-idle-timeout", time.Minute, "close an on-demand broker connection after this long without requests (keep it below the brokers' connections.max.idle.ms)"),
		boolFlag("upstream-tls", false, "connect to brokers over TLS (implied by any --upstream-tls-* file)"),
		stringFlag("upstream-tls-ca", "", "PEM CAs of the brokers' certificates (default: the system pool); reloaded when it changes"),
		stringFlag("upstream-tls-cert", "", "PEM client certificate presented to brokers (with --upstream-tls-key); reloaded when it changes"),
		stringFlag("upstream-tls-key", "", "PEM private key of --upstream-tls-cert"),
		stringFlag("upstream-tls-server-name", "", "name checked in broker certificates (default: each broker's host)"),
		stringFlag("upstream-sasl-mechanism", "", "authenticate to brokers with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)"),
		stringFlag("upstream-sasl-user", "", "SASL user toward brokers"),
		stringFlag("upstream-sasl-password-file", "", "file holding the SASL password toward brokers (else $"+upstreamPasswordEnv+")"),
	}
}

func upstreamTLSFrom(c *cli.Context) (func(string) *tls.Config, error) {
	f := tlsreload.Files{
		CAFile: c.String("upstream-tls-ca"), CertFile: c.String("upstream-tls-cert"), KeyFile: c.String("upstream-tls-key"),
		ServerName: c.String("upstream-tls-server-name"),
	}
	if !c.Bool("upstream-tls") && f.CAFile == "" && f.CertFile == "" && f.KeyFile == "" {
		return nil, nil
	}
	rc, err := tlsreload.New(f, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("upstream TLS: %w", err)
	}
	return rc.Config, nil
}

func upstreamSASLFrom(c *cli.Context) (sasl.Mechanism, error) {
	mech := strings.ToUpper(c.String("upstream-sasl-mechanism"))
	if mech == "" {
		return nil, nil
	}
	user := c.String("upstream-sasl-user")
	if user == "" {
		return nil, fmt.Errorf("--upstream-sasl-mechanism %s needs --upstream-sasl-user", mech)
	}
	pw, err := secretFrom(c.String("upstream-sasl-password-file"), upstreamPasswordEnv, "--upstream-sasl-password-file")
	if err != nil {
		return nil, err
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pw}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pw}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pw}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--upstream-sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
}

// secretFrom reads a secret from file, else from the environment variable
// env; flag names the file's flag in errors. The secret is never logged.
func secretFrom(file, env, flag string) (string, error) {
	if file == "" {
		if s := os.Getenv(env); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("needs %s or $%s", flag, env)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", flag, file)
	}
	return s, nil
}

// brokerTLSFlags give the stub broker a TLS listener.
func brokerTLSFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("tls-cert", "", "PEM certificate: the broker's listener serves TLS (with --tls-key)"),
		stringFlag("tls-key", "", "PEM private key of --tls-cert"),
	}
}

func brokerTLSFrom(c *cli.Context) (*tls.Config, error) {
	cert, key := c.String("tls-cert"), c.String("tls-key")
	if cert == "" && key == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, nil
}

// upstreamSecurityFrom is the TLS and SASL the proxy uses toward brokers.
func upstreamSecurityFrom(c *cli.Context) (func(string) *tls.Config, sasl.Mechanism, error) {
	upTLS, err := upstreamTLSFrom(c)
	if err != nil {
		return nil, nil, err
	}
	upSASL, err := upstreamSASLFrom(c)
	return upTLS, upSASL, err
}
