package security

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/security/sasl"
)

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

// produceConsume produces n records to a new topic through addr and reads
// them back in a consumer group.
func produceConsume(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx := testContext(t, 60*time.Second)
	p := newClient(t, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation()}, opts...)...)
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d to %s via %s: %v", i, topic, addr, err)
		}
	}
	c := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumerGroup(topic + "-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d from %s via %s", got, n, topic, addr)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch via %s: %v", addr, err) })
		got += fs.NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit via %s: %v", addr, err)
	}
}

func TestSASLMechanismsWithKgo(t *testing.T) {
	env := startSASL(t, nil)
	tlsOpt := kgo.DialTLSConfig(env.tls)
	for _, tc := range []struct {
		name string
		addr string
		opts []kgo.Opt
	}{
		{"SCRAM-SHA-512 over SASL_SSL", env.secure, []kgo.Opt{tlsOpt, scram512("alice", "alice-secret")}},
		{"SCRAM-SHA-256 over SASL_PLAINTEXT", env.plain, []kgo.Opt{kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())}},
		{"PLAIN over SASL_SSL", env.secure, []kgo.Opt{tlsOpt, kgo.SASL(kplain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			produceConsume(t, tc.addr, "t-"+strings.NewReplacer(" ", "-").Replace(strings.ToLower(tc.name)), 5, tc.opts...)
		})
	}
	if !strings.Contains(env.audit.String(), `"event":"authentication_succeeded","listener":"SASL_SSL"`) ||
		!strings.Contains(env.audit.String(), `"principal":"User:alice","mechanism":"SCRAM-SHA-512"`) {
		t.Errorf("audit log lacks the SCRAM-SHA-512 success of User:alice:\n%s", env.audit.String())
	}
	if strings.Contains(env.audit.String(), "alice-secret") {
		t.Error("audit log holds the password")
	}
}

// TestSASLRefusals: each refusal has the outcome a Kafka broker gives.
func TestSASLRefusals(t *testing.T) {
	env := startSASL(t, func(c *sasl.Config) { c.Mechanisms = []string{sasl.ScramSHA512, sasl.Plain} })
	tlsOpt := kgo.DialTLSConfig(env.tls)
	for _, tc := range []struct {
		name string
		addr string
		opts []kgo.Opt
		want error
	}{
		{"wrong password", env.secure, []kgo.Opt{tlsOpt, scram512("alice", "guess")}, kerr.SaslAuthenticationFailed},
		{"unknown user", env.secure, []kgo.Opt{tlsOpt, scram512("nobody", "x")}, kerr.SaslAuthenticationFailed},
		{"PLAIN wrong password", env.secure, []kgo.Opt{tlsOpt, kgo.SASL(kplain.Auth{User: "alice", Pass: "guess"}.AsMechanism())}, kerr.SaslAuthenticationFailed},
		{"mechanism not enabled", env.secure, []kgo.Opt{tlsOpt, kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())}, kerr.UnsupportedSaslMechanism},
		{"PLAIN without TLS", env.plain, []kgo.Opt{kgo.SASL(kplain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}, kerr.UnsupportedSaslMechanism},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 15*time.Second)
			cl := newClient(t, tc.addr, append(tc.opts, kgo.RequestRetries(0))...)
			start := time.Now()
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if !errors.Is(err, tc.want) {
				t.Fatalf("metadata: err = %v, want %v", err, tc.want)
			}
			if tc.want == kerr.SaslAuthenticationFailed && time.Since(start) < 50*time.Millisecond {
				t.Errorf("failure answered after %v, before the 50ms failure delay", time.Since(start))
			}
		})
	}
	if strings.Contains(env.audit.String(), "guess") {
		t.Error("audit log holds a password")
	}

	t.Run("SASL client on the SASL_SSL listener without TLS", func(t *testing.T) {
		ctx := testContext(t, 10*time.Second)
		cl := newClient(t, env.secure, scram512("alice", "alice-secret"), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("ping without TLS succeeded")
		}
	})
	t.Run("Produce before authentication", func(t *testing.T) {
		r := dialRaw(t, env.plain)
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
		r.send(av)
		if resp := r.response(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions before authentication: error %d", resp.ErrorCode)
		}
		p := kmsg.NewPtrProduceRequest()
		p.Version, p.Acks, p.TimeoutMillis = 7, 1, 1000
		r.send(p)
		if !r.closed() {
			t.Fatal("Produce before authentication was answered; want the connection closed")
		}
	})
	t.Run("SaslAuthenticate before SaslHandshake", func(t *testing.T) {
		r := dialRaw(t, env.plain)
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.Version = 1
		r.send(a)
		if resp := r.response(a).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
		}
		if !r.closed() {
			t.Fatal("connection left open after ILLEGAL_SASL_STATE")
		}
	})
	t.Run("unsupported mechanism lists the enabled ones", func(t *testing.T) {
		r := dialRaw(t, env.plain)
		h := kmsg.NewPtrSASLHandshakeRequest()
		h.Version, h.Mechanism = 1, "GSSAPI"
		r.send(h)
		resp := r.response(h).(*kmsg.SASLHandshakeResponse)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "SCRAM-SHA-512" {
			t.Fatalf("error %d, mechanisms %v; want UNSUPPORTED_SASL_MECHANISM and [SCRAM-SHA-512] (PLAIN only over TLS)", resp.ErrorCode, resp.SupportedMechanisms)
		}
		if !r.closed() {
			t.Fatal("connection left open")
		}
	})
	t.Run("frame over 512 KiB before authentication", func(t *testing.T) {
		r := dialRaw(t, env.plain)
		if _, err := r.c.Write([]byte{0, 0x08, 0, 1}); err != nil { // 512 KiB + 1
			t.Fatal(err)
		}
		if !r.closed() {
			t.Fatal("oversize unauthenticated frame not refused")
		}
	})
	t.Run("metrics", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			labels map[string]string
			min    float64
		}{
			{"kproxy_authentications_total", map[string]string{"mechanism": "SCRAM-SHA-512", "outcome": "failure"}, 2},
			{"kproxy_authentications_total", map[string]string{"mechanism": "PLAIN", "outcome": "failure"}, 1},
			{"kproxy_connections_rejected_total", map[string]string{"reason": "request_before_authentication"}, 1},
			{"kproxy_connections_rejected_total", map[string]string{"reason": "authentication_failed"}, 3},
			{"kproxy_connections_rejected_total", map[string]string{"reason": "tls_handshake"}, 1},
			{"kproxy_listener_connections_total", map[string]string{"listener": "SASL_PLAINTEXT"}, 4},
			{"kproxy_listener_connections_total", map[string]string{"listener": "SASL_SSL"}, 5},
		} {
			if got := env.counter(t, c.name, c.labels); got < c.min {
				t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
			}
		}
	})
	t.Run("SaslHandshake on a PLAINTEXT listener", func(t *testing.T) {
		r := dialRaw(t, env.plaintext)
		h := kmsg.NewPtrSASLHandshakeRequest()
		h.Version, h.Mechanism = 1, "PLAIN"
		r.send(h)
		if resp := r.response(h).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
		}
	})
}

// TestHandshakeTimeout: a client that connects to a SASL listener and does
// not authenticate in time is disconnected, on TLS listeners too.
func TestHandshakeTimeout(t *testing.T) {
	env := startSASL(t, nil, func(c *assembly.Config) { c.Security.HandshakeTimeout = 300 * time.Millisecond })
	start := time.Now()
	r := dialRaw(t, env.plain)
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.Version, h.Mechanism = 1, sasl.ScramSHA512
	r.send(h)
	if resp := r.response(h).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake error %d", resp.ErrorCode)
	}
	if !r.closed() {
		t.Fatal("connection open 5s after a handshake that never authenticated")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("closed after %v, before the 300ms bound", d)
	}
	silent := dialRaw(t, env.secure) // TCP only: not even a TLS ClientHello
	if !silent.closed() {
		t.Fatal("silent connection on the TLS listener left open")
	}
	if got := env.counter(t, "kproxy_connections_rejected_total", map[string]string{"reason": "authentication_timeout"}); got < 1 {
		t.Errorf("authentication_timeout rejections = %v", got)
	}
}
