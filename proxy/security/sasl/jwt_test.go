package sasl

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func ecJWKS(t *testing.T, kid string, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	pub, err := key.PublicKey.Bytes() // uncompressed: 0x04, X, Y (32 bytes each for P-256)
	if err != nil || len(pub) != 65 {
		t.Fatalf("public key bytes: %v (%d bytes)", err, len(pub))
	}
	x, y := pub[1:33], pub[33:]
	b, err := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig", "x": b64(x), "y": b64(y)}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTVerifierFile(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, ecJWKS(t, "k1", k1), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := NewJWTVerifier(context.Background(), JWTConfig{JWKSFile: file, Issuer: "iss", Audience: "aud", Algorithms: []string{"ES256"}, ClockSkew: time.Second, PrincipalClaim: "client_id"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	base := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "iss", "aud": "aud", "client_id": "svc", "exp": now.Add(time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, base(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, err string
	}{
		{"good", sign(t, jwt.SigningMethodES256, "k1", k1, base(nil)), ""},
		{"unsigned", none, "signature"},
		{"HMAC not allowed", sign(t, jwt.SigningMethodHS256, "k1", []byte("secret"), base(nil)), "signing method"},
		{"unknown key", sign(t, jwt.SigningMethodES256, "k2", k2, base(nil)), "key"},
		{"expired", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), "expired"},
		{"no expiry", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { delete(c, "exp") })), "exp"},
		{"not yet valid", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() })), "not valid yet"},
		{"other issuer", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { c["iss"] = "x" })), "issuer"},
		{"other audience", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { c["aud"] = "x" })), "audience"},
		{"no principal claim", sign(t, jwt.SigningMethodES256, "k1", k1, base(func(c jwt.MapClaims) { delete(c, "client_id") })), "client_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, exp, err := v.Verify(tc.token)
			if tc.err == "" {
				if err != nil || p.Name != "svc" || exp.Unix() != now.Add(time.Minute).Unix() {
					t.Fatalf("Verify = %v, %v, %v", p, exp, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
			}
		})
	}
	// Rotating the file to k2's key: k2 tokens verify after a reload.
	if err := os.WriteFile(file, ecJWKS(t, "k2", k2), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := v.loadFile(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	if _, _, err := v.Verify(sign(t, jwt.SigningMethodES256, "k2", k2, base(nil))); err != nil {
		t.Fatalf("k2 token after rotation: %v", err)
	}
}

func TestJWTVerifierConfig(t *testing.T) {
	for _, cfg := range []JWTConfig{
		{JWKSFile: "x", Audience: "a"},
		{JWKSFile: "x", Issuer: "i"},
		{Issuer: "i", Audience: "a"},
		{JWKSURL: "http://insecure", Issuer: "i", Audience: "a"},
		{JWKSFile: "x", Issuer: "i", Audience: "a", Algorithms: []string{"none"}},
	} {
		if _, err := NewJWTVerifier(context.Background(), cfg); err == nil {
			t.Errorf("NewJWTVerifier(%+v) accepted", cfg)
		}
	}
}
