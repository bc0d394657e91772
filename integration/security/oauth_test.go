package security

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	koauth "github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kproxy/kproxy/proxy/security/sasl"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "kproxy"
)

// jwksServer serves the public half of key as a JWKS over TLS.
func jwksServer(t *testing.T, key *rsa.PrivateKey) *httptest.Server {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	set := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func signToken(t *testing.T, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(sub, aud string, exp time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": sub, "iss": testIssuer, "aud": aud, "exp": exp.Unix(), "iat": time.Now().Add(-time.Minute).Unix()}
}

func oauthEnv(t *testing.T, maxSession time.Duration) (*saslEnv, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := jwksServer(t, key)
	v, err := sasl.NewJWTVerifier(testContext(t, 5*time.Minute), sasl.JWTConfig{
		JWKSURL: srv.URL + "/jwks.json", HTTPClient: srv.Client(),
		Issuer: testIssuer, Audience: testAudience, Algorithms: []string{"RS256"}, ClockSkew: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	env := startSASL(t, func(c *sasl.Config) {
		c.Mechanisms = []string{sasl.OAuthBearer, sasl.ScramSHA512}
		c.Tokens = v
		c.MaxSession = maxSession
	})
	return env, key
}

func bearer(tok string) kgo.Opt {
	return kgo.SASL(koauth.Auth{Token: tok}.AsMechanism())
}

func TestOAuthBearerWithKgo(t *testing.T) {
	env, key := oauthEnv(t, 0)
	tlsOpt := kgo.DialTLSConfig(env.tls)
	good := signToken(t, key, claims("svc-orders", testAudience, time.Now().Add(time.Hour)))
	produceConsume(t, env.secure, "oauth", 5, tlsOpt, bearer(good))
	if want := `"principal":"User:svc-orders","mechanism":"OAUTHBEARER"`; !contains(env.audit.String(), want) {
		t.Errorf("audit log lacks %s:\n%s", want, env.audit.String())
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims("mallory", testAudience, time.Now().Add(time.Hour))).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{
		{"unsigned token", unsigned},
		{"expired token", signToken(t, key, claims("svc-orders", testAudience, time.Now().Add(-time.Minute)))},
		{"token for another audience", signToken(t, key, claims("svc-orders", "someone-else", time.Now().Add(time.Hour)))},
		{"token signed by another key", signToken(t, other, claims("svc-orders", testAudience, time.Now().Add(time.Hour)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 15*time.Second)
			cl := newClient(t, env.secure, tlsOpt, bearer(tc.token), kgo.RequestRetries(0))
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("metadata: err = %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
	if contains(env.audit.String(), good[:40]) {
		t.Error("audit log holds a token")
	}
}
