package sasl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

type creds map[string]scram.StoredCredentials

func (c creds) SCRAM(mech, user string) (scram.StoredCredentials, bool) {
	v, ok := c[mech+"/"+user]
	return v, ok
}

func newCreds(t *testing.T, users ...string) creds {
	c := creds{}
	for _, u := range users {
		for _, m := range []string{ScramSHA256, ScramSHA512} {
			sc, err := FromPassword(m, u+"-pw", []byte("salt-"+u), 4096)
			if err != nil {
				t.Fatal(err)
			}
			c[m+"/"+u] = sc
		}
	}
	return c
}

type tokens map[string]principal.Principal

func (tk tokens) Verify(tok string) (principal.Principal, time.Time, error) {
	p, ok := tk[tok]
	if !ok {
		return principal.Principal{}, time.Time{}, errors.New("bad token")
	}
	return p, time.Now().Add(time.Minute), nil
}

func newAuth(t *testing.T, cfg Config) *Authenticator {
	t.Helper()
	if cfg.Credentials == nil {
		cfg.Credentials = newCreds(t, "alice", "bob")
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func handshake(t *testing.T, s *Session, v int16, mech string) (*kmsg.SASLHandshakeResponse, Outcome) {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = v, mech
	o, err := s.Handshake(v, req.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = v
	if err := resp.ReadFrom(o.Body); err != nil {
		t.Fatal(err)
	}
	return resp, o
}

func authenticate(t *testing.T, s *Session, auth []byte) (*kmsg.SASLAuthenticateResponse, Outcome) {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 1, auth
	o, err := s.Authenticate(1, req.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(o.Body); err != nil {
		t.Fatal(err)
	}
	return resp, o
}

// scramLogin runs a whole SCRAM exchange with xdg-go's client.
func scramLogin(t *testing.T, s *Session, mech, user, pass string) Outcome {
	t.Helper()
	if resp, _ := handshake(t, s, 1, mech); resp.ErrorCode != 0 {
		t.Fatalf("handshake %s: error %d", mech, resp.ErrorCode)
	}
	gen := scram.SHA512
	if mech == ScramSHA256 {
		gen = scram.SHA256
	}
	cl, err := gen.NewClientUnprepped(user, pass, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := cl.NewConversation()
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	var o Outcome
	for range 3 {
		var resp *kmsg.SASLAuthenticateResponse
		resp, o = authenticate(t, s, []byte(msg))
		if resp.ErrorCode != 0 || o.Done {
			return o
		}
		if msg, err = conv.Step(string(resp.SASLAuthBytes)); err != nil {
			t.Fatalf("client step: %v", err)
		}
	}
	return o
}

func TestSCRAMSessions(t *testing.T) {
	a := newAuth(t, Config{MaxSession: time.Minute})
	for _, tc := range []struct {
		name, mech, user, pass string
		ok                     bool
	}{
		{"sha-512", ScramSHA512, "alice", "alice-pw", true},
		{"sha-256", ScramSHA256, "bob", "bob-pw", true},
		{"wrong password", ScramSHA512, "alice", "nope", false},
		{"unknown user", ScramSHA512, "mallory", "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := a.NewSession(true)
			o := scramLogin(t, s, tc.mech, tc.user, tc.pass)
			if o.Done != tc.ok || o.Fail == tc.ok || s.Authenticated() != tc.ok {
				t.Fatalf("outcome %+v, authenticated %v; want ok=%v", o, s.Authenticated(), tc.ok)
			}
			if tc.ok && (s.Principal() != principal.User(tc.user) || o.Lifetime != time.Minute) {
				t.Fatalf("principal %v lifetime %v", s.Principal(), o.Lifetime)
			}
		})
	}
}

func TestOutOfOrderSteps(t *testing.T) {
	a := newAuth(t, Config{Mechanisms: []string{ScramSHA512, Plain}})
	// SaslAuthenticate before any handshake: ILLEGAL_SASL_STATE, close.
	s := a.NewSession(false)
	if resp, o := authenticate(t, s, []byte("x")); resp.ErrorCode != kerr.IllegalSaslState.Code || !o.Close {
		t.Fatalf("authenticate first: code %d close %v", resp.ErrorCode, o.Close)
	}
	// Two handshakes in a row.
	s = a.NewSession(false)
	handshake(t, s, 1, ScramSHA512)
	if resp, o := handshake(t, s, 1, ScramSHA512); resp.ErrorCode != kerr.IllegalSaslState.Code || !o.Close {
		t.Fatalf("second handshake: code %d close %v", resp.ErrorCode, o.Close)
	}
	// PLAIN is not offered without TLS; the enabled list comes back.
	s = a.NewSession(false)
	resp, o := handshake(t, s, 1, Plain)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !o.Close || strings.Join(resp.SupportedMechanisms, ",") != ScramSHA512 {
		t.Fatalf("PLAIN without TLS: code %d mechanisms %v", resp.ErrorCode, resp.SupportedMechanisms)
	}
	// Allowed explicitly, PLAIN is offered without TLS too.
	open := newAuth(t, Config{Mechanisms: []string{ScramSHA512, Plain}, PlainWithoutTLS: true}).NewSession(false)
	if resp, _ := handshake(t, open, 1, Plain); resp.ErrorCode != 0 {
		t.Fatalf("PLAIN allowed without TLS: code %d", resp.ErrorCode)
	}
	// v0 handshake: raw tokens follow.
	s = a.NewSession(true)
	handshake(t, s, 0, Plain)
	if !s.RawNext() {
		t.Fatal("no raw token expected after SaslHandshake v0")
	}
	if o := s.RawToken([]byte("\x00alice\x00alice-pw")); !o.Done || o.Body == nil || len(o.Body) != 0 {
		t.Fatalf("raw PLAIN: %+v", o)
	}
	// Authenticated and not re-authenticating: SaslAuthenticate gets the
	// error but the connection stays.
	if resp, o := authenticate(t, s, []byte("x")); resp.ErrorCode != kerr.IllegalSaslState.Code || o.Close {
		t.Fatalf("authenticate after success: code %d close %v", resp.ErrorCode, o.Close)
	}
}

func TestReauthentication(t *testing.T) {
	now := time.Now()
	a := newAuth(t, Config{MaxSession: 2 * time.Second, Now: func() time.Time { return now }})
	s := a.NewSession(true)
	if o := scramLogin(t, s, ScramSHA512, "alice", "alice-pw"); !o.Done || o.Reauth {
		t.Fatalf("login: %+v", o)
	}
	now = now.Add(3 * time.Second)
	if !s.Expired(now) {
		t.Fatal("session not expired after its lifetime")
	}
	if o := scramLogin(t, s, ScramSHA512, "alice", "alice-pw"); !o.Done || !o.Reauth || s.Expired(now) {
		t.Fatalf("re-authentication: %+v, expired %v", o, s.Expired(now))
	}
	// Another principal on the same connection is refused.
	if o := scramLogin(t, s, ScramSHA512, "bob", "bob-pw"); !o.Fail || !strings.Contains(o.Reason, "not the session's") {
		t.Fatalf("re-authentication as bob: %+v", o)
	}
	// So is another mechanism.
	s = a.NewSession(true)
	scramLogin(t, s, ScramSHA512, "alice", "alice-pw")
	if resp, o := handshake(t, s, 1, ScramSHA256); resp.ErrorCode != kerr.IllegalSaslState.Code || !o.Close {
		t.Fatalf("re-authentication with another mechanism: code %d", resp.ErrorCode)
	}
}

func TestOAuthBearerMessages(t *testing.T) {
	a := newAuth(t, Config{Mechanisms: []string{OAuthBearer}, Tokens: tokens{"good": principal.User("svc")}})
	for _, tc := range []struct {
		name, msg string
		ok        bool
	}{
		{"kgo form", "n,,\x01auth=Bearer good\x01\x01", true},
		{"authzid matches", "n,a=svc,\x01auth=Bearer good\x01host=x\x01\x01", true},
		{"authzid differs", "n,a=root,\x01auth=Bearer good\x01\x01", false},
		{"bad token", "n,,\x01auth=Bearer bad\x01\x01", false},
		{"no token", "n,,\x01host=x\x01\x01", false},
		{"not bearer", "n,,\x01auth=Basic good\x01\x01", false},
		{"malformed", "garbage", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := a.NewSession(true)
			handshake(t, s, 1, OAuthBearer)
			resp, o := authenticate(t, s, []byte(tc.msg))
			if o.Done != tc.ok || (resp.ErrorCode == 0) != tc.ok {
				t.Fatalf("outcome %+v code %d; want ok=%v", o, resp.ErrorCode, tc.ok)
			}
			if !tc.ok && resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Fatalf("code %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
			}
			if tc.ok && (resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > 60_000) {
				t.Fatalf("lifetime %dms, want the token's ~60s", resp.SessionLifetimeMillis)
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []Config{
		{Mechanisms: []string{"GSSAPI"}, Credentials: creds{}},
		{Mechanisms: []string{OAuthBearer}},
		{Mechanisms: []string{ScramSHA512}},
		{Mechanisms: []string{ScramSHA512, ScramSHA512}, Credentials: creds{}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
