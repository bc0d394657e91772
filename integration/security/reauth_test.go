package security

import (
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/sasl"
)

// TestReauthenticationKgo: with a 2s session, kgo re-authenticates on its
// connections by itself and produces for 10s without an error.
func TestReauthenticationKgo(t *testing.T) {
	env := startSASL(t, func(c *sasl.Config) { c.MaxSession = 2 * time.Second })
	ctx := testContext(t, 60*time.Second)
	cl := newClient(t, env.secure, kgo.DialTLSConfig(env.tls), scram512("alice", "alice-secret"),
		kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	end := time.Now().Add(10 * time.Second)
	n := 0
	for time.Now().Before(end) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce %d after %v: %v", n, 10*time.Second-time.Until(end), err)
		}
		n++
		time.Sleep(20 * time.Millisecond)
	}
	reauths := strings.Count(env.audit.String(), `"event":"reauthenticated"`)
	if reauths < 3 {
		t.Errorf("%d re-authentications in 10s with a 2s session; want at least 3", reauths)
	}
	t.Logf("%d records, %d re-authentications", n, reauths)
}

// TestSessionExpiryKafkaGo: segmentio/kafka-go never re-authenticates; its
// connection is closed once the session has expired, and it carries on
// after reconnecting.
func TestSessionExpiryKafkaGo(t *testing.T) {
	env := startSASL(t, func(c *sasl.Config) { c.MaxSession = 2 * time.Second })
	mech, err := kgscram.Mechanism(kgscram.SHA512, "alice", "alice-secret")
	if err != nil {
		t.Fatal(err)
	}
	w := &kafkago.Writer{
		Addr: kafkago.TCP(env.secure), Topic: "expiry", AllowAutoTopicCreation: true,
		Transport:   &kafkago.Transport{TLS: env.tls, SASL: mech, IdleTimeout: time.Minute},
		MaxAttempts: 10, BatchTimeout: time.Millisecond, WriteBackoffMin: 10 * time.Millisecond,
	}
	t.Cleanup(func() { w.Close() })
	ctx := testContext(t, 60*time.Second)
	end := time.Now().Add(7 * time.Second)
	n := 0
	for time.Now().Before(end) {
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte("v")}); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		n++
		time.Sleep(100 * time.Millisecond)
	}
	log := env.audit.String()
	expired := strings.Count(log, "session expired")
	auths := strings.Count(log, `"event":"authentication_succeeded"`)
	if expired < 1 || auths < 2 {
		t.Fatalf("%d connections closed at expiry, %d authentications; want at least 1 and 2:\n%s", expired, auths, log)
	}
	t.Logf("%d writes, %d expiries, %d authentications", n, expired, auths)
}

// TestOAuthSessionLifetimeIsTokenExpiry: SaslAuthenticate v1 answers with
// the lesser of the maximum session and the token's remaining life.
func TestOAuthSessionLifetimeIsTokenExpiry(t *testing.T) {
	env, key := oauthEnv(t, time.Hour)
	tok := signToken(t, key, claims("svc", testAudience, time.Now().Add(30*time.Second)))
	r := dialRaw(t, env.plain)
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.Version, h.Mechanism = 1, sasl.OAuthBearer
	r.send(h)
	if resp := r.response(h).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake error %d", resp.ErrorCode)
	}
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.Version = 1
	a.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
	r.send(a)
	resp := r.response(a).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("authenticate error %d", resp.ErrorCode)
	}
	if l := resp.SessionLifetimeMillis; l > 30_000 || l < 20_000 {
		t.Fatalf("session lifetime %dms; want the token's remaining ~30s, not the 1h maximum", l)
	}
}
