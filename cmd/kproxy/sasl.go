package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/proxy/security/sasl"
)

// saslFlags are the SASL settings of `kproxy serve`.
func saslFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("sasl-mechanisms", "SCRAM-SHA-512,SCRAM-SHA-256", "mechanisms of the SASL listeners: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER"),
		boolFlag("sasl-plain-without-tls", false, "offer PLAIN on SASL_PLAINTEXT listeners too (it sends the password in the clear)"),
		durationFlag("sasl-max-session", 0, "longest session before a client must re-authenticate (KIP-368; Kafka's connections.max.reauth.ms; 0: no limit but a token's expiry)"),
		durationFlag("sasl-failure-delay", 100*time.Millisecond, "delay before answering a failed authentication"),
		stringFlag("sasl-secret-file", "", "file whose bytes key the stand-in SCRAM salts of unknown users, so that they are stable per name; give every replica behind one address the same (default: random per process, which lets a client that reaches two replicas tell unknown users)"),
		stringFlag("oauth-jwks-file", "", "OAUTHBEARER: JWKS file with the token signing keys (re-read when it changes)"),
		stringFlag("oauth-jwks-url", "", "OAUTHBEARER: https URL of the JWKS (refreshed every --oauth-jwks-refresh)"),
		stringFlag("oauth-jwks-ca-file", "", "OAUTHBEARER: PEM CAs for the JWKS URL (default: the system's)"),
		durationFlag("oauth-jwks-refresh", 5*time.Minute, "OAUTHBEARER: JWKS refresh interval"),
		stringFlag("oauth-issuer", "", "OAUTHBEARER: required token issuer (iss)"),
		stringFlag("oauth-audience", "", "OAUTHBEARER: required token audience (aud)"),
		stringFlag("oauth-algorithms", "RS256,ES256", "OAUTHBEARER: allowed signing algorithms (none is never allowed)"),
		durationFlag("oauth-clock-skew", 30*time.Second, "OAUTHBEARER: tolerated clock difference for exp and nbf"),
		stringFlag("oauth-principal-claim", "sub", "OAUTHBEARER: claim naming the principal"),
	}
}

// saslFromFlags builds the SASL settings (nil when no SASL listener needs
// them is decided by the proxy; they are always built). Credentials stay
// nil: the proxy then uses the SCRAM credentials in etcd.
func saslFromFlags(c *cli.Context, log *slog.Logger, runners *[]runner) (*sasl.Config, error) {
	mechs := commalist.Split(c.String("sasl-mechanisms"))
	cfg := &sasl.Config{
		Mechanisms: mechs, PlainWithoutTLS: c.Bool("sasl-plain-without-tls"),
		MaxSession: c.Duration("sasl-max-session"), FailureDelay: c.Duration("sasl-failure-delay"),
	}
	if f := c.String("sasl-secret-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--sasl-secret-file: %w", err)
		}
		if len(b) < 16 {
			return nil, fmt.Errorf("--sasl-secret-file %s: %d bytes, want at least 16", f, len(b))
		}
		cfg.Secret = b
	}
	if !slices.Contains(mechs, sasl.OAuthBearer) {
		return cfg, nil
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if f := c.String("oauth-jwks-ca-file"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--oauth-jwks-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--oauth-jwks-ca-file %s holds no PEM certificate", f)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	v, err := sasl.NewJWTVerifier(c.Context, sasl.JWTConfig{
		JWKSFile: c.String("oauth-jwks-file"), JWKSURL: c.String("oauth-jwks-url"), HTTPClient: client,
		Refresh: c.Duration("oauth-jwks-refresh"), Issuer: c.String("oauth-issuer"), Audience: c.String("oauth-audience"),
		Algorithms: commalist.Split(c.String("oauth-algorithms")), ClockSkew: c.Duration("oauth-clock-skew"),
		PrincipalClaim: c.String("oauth-principal-claim"), Logger: log.With("component", "jwks"),
	})
	if err != nil {
		return nil, err
	}
	cfg.Tokens = v
	*runners = append(*runners, v.Run)
	return cfg, nil
}
