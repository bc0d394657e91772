package sasl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/kproxy/kproxy/internal/reload"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// JWTConfig configures a JWTVerifier, OAUTHBEARER's token check.
type JWTConfig struct {
	// JWKSFile or JWKSURL (https) is where the signing keys are; the file
	// is re-read when it changes, the URL fetched again every Refresh.
	JWKSFile string
	JWKSURL  string
	// HTTPClient fetches JWKSURL (default: http.DefaultClient's transport
	// with a 10s timeout).
	HTTPClient *http.Client
	Refresh    time.Duration // default 5m (file: checked every 10s)
	// Issuer and Audience are required: a token must name both.
	Issuer, Audience string
	// Algorithms is the allowlist of signing algorithms (default RS256,
	// ES256). "none" is never accepted.
	Algorithms []string
	// ClockSkew tolerates clocks apart when checking exp and nbf (default
	// 30s).
	ClockSkew time.Duration
	// PrincipalClaim names the claim holding the user (default "sub").
	PrincipalClaim string
	Logger         *slog.Logger
}

// JWTVerifier checks signed JWTs against a JWKS.
type JWTVerifier struct {
	cfg    JWTConfig
	parser *jwt.Parser
	keys   atomic.Pointer[keyfunc.Keyfunc]
	raw    []byte // the file's last contents
}

// NewJWTVerifier loads the JWKS (a URL's refreshes run until ctx ends).
func NewJWTVerifier(ctx context.Context, cfg JWTConfig) (*JWTVerifier, error) {
	switch {
	case cfg.Issuer == "" || cfg.Audience == "":
		return nil, errors.New("sasl: OAUTHBEARER needs an issuer and an audience")
	case (cfg.JWKSFile == "") == (cfg.JWKSURL == ""):
		return nil, errors.New("sasl: OAUTHBEARER needs exactly one of a JWKS file and a JWKS URL")
	case cfg.JWKSURL != "" && !strings.HasPrefix(cfg.JWKSURL, "https://"):
		return nil, fmt.Errorf("sasl: JWKS URL %q is not https", cfg.JWKSURL)
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = []string{"RS256", "ES256"}
	}
	for _, a := range cfg.Algorithms {
		if strings.EqualFold(a, "none") {
			return nil, errors.New("sasl: algorithm none cannot be allowed")
		}
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := &JWTVerifier{cfg: cfg, parser: jwt.NewParser(
		jwt.WithValidMethods(cfg.Algorithms), jwt.WithIssuer(cfg.Issuer), jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.ClockSkew), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
	)}
	if cfg.JWKSFile != "" {
		if _, err := v.loadFile(); err != nil {
			return nil, err
		}
		return v, nil
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	no := false // fail now if the first fetch fails
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client: client, RefreshInterval: cfg.Refresh, NoErrorReturnFirstHTTPReq: &no,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				cfg.Logger.Warn("JWKS refresh failed; keeping the previous keys", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("sasl: JWKS from %s: %w", cfg.JWKSURL, err)
	}
	v.keys.Store(&kf)
	return v, nil
}

// Run re-reads a JWKS file when it changes, until ctx ends (a URL's
// refreshes run on their own).
func (v *JWTVerifier) Run(ctx context.Context) error {
	if v.cfg.JWKSFile == "" {
		<-ctx.Done()
		return nil
	}
	reload.Every(ctx, min(v.cfg.Refresh, 10*time.Second), v.cfg.Logger.With("file", v.cfg.JWKSFile), "JWKS", v.loadFile)
	return nil
}

func (v *JWTVerifier) loadFile() (bool, error) {
	raw, err := os.ReadFile(v.cfg.JWKSFile)
	if err != nil {
		return false, fmt.Errorf("sasl: read JWKS %s: %w", v.cfg.JWKSFile, err)
	}
	if v.keys.Load() != nil && bytes.Equal(raw, v.raw) {
		return false, nil
	}
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		return false, fmt.Errorf("sasl: JWKS %s: %w", v.cfg.JWKSFile, err)
	}
	v.keys.Store(&kf)
	v.raw = raw
	return true, nil
}

// Verify checks the token's signature, algorithm, issuer, audience, expiry
// and not-before, and returns the principal its claim names.
func (v *JWTVerifier) Verify(token string) (principal.Principal, time.Time, error) {
	kf := *v.keys.Load()
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, kf.Keyfunc); err != nil {
		return principal.Principal{}, time.Time{}, err
	}
	name, _ := claims[v.cfg.PrincipalClaim].(string)
	if name == "" {
		return principal.Principal{}, time.Time{}, fmt.Errorf("token has no %q claim", v.cfg.PrincipalClaim)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return principal.Principal{}, time.Time{}, errors.New("token has no expiry")
	}
	return principal.User(name), exp.Time, nil
}
