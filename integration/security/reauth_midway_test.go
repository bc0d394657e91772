package security

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/sasl"
)

// TestRequestMidReauthenticationCloses: a request other than SaslHandshake
// and SaslAuthenticate sent after a re-authentication's SaslHandshake and
// before its SaslAuthenticate closes the connection, as Kafka does, counted
// under request_during_reauthentication; it was served under the old
// principal. Once the re-authentication is done, requests are served again.
func TestRequestMidReauthenticationCloses(t *testing.T) {
	env, key := oauthEnv(t, time.Hour)
	tok := signToken(t, key, claims("svc", testAudience, time.Now().Add(time.Hour)))
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 7, 1, 1000
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 9
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 3
	for _, tc := range []struct {
		name   string
		req    kmsg.Request
		finish bool // complete the re-authentication before req
	}{
		{"Metadata", metadata, false},
		{"Produce", produce, false},
		{"ApiVersions", versions, false},
		{"Metadata after the re-authentication", metadata, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := env.counter(t, "kproxy_connections_rejected_total", map[string]string{"reason": "request_during_reauthentication"})
			r := dialRaw(t, env.plain)
			authenticate := func(step string) {
				t.Helper()
				h := kmsg.NewPtrSASLHandshakeRequest()
				h.Version, h.Mechanism = 1, sasl.OAuthBearer
				r.send(h)
				if resp := r.response(h).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
					t.Fatalf("%s: handshake error %d", step, resp.ErrorCode)
				}
				if step == "re-authentication" && !tc.finish {
					return
				}
				a := kmsg.NewPtrSASLAuthenticateRequest()
				a.Version = 1
				a.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + tok + "\x01\x01")
				r.send(a)
				if resp := r.response(a).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != 0 {
					t.Fatalf("%s: authenticate error %d", step, resp.ErrorCode)
				}
			}
			authenticate("authentication")
			authenticate("re-authentication")
			r.send(tc.req)
			want := 0.0
			if tc.finish {
				r.response(tc.req)
			} else {
				if !r.closed() {
					t.Fatalf("%s between the re-authentication's steps was answered", kmsg.NameForKey(tc.req.Key()))
				}
				want = 1
			}
			got := env.counter(t, "kproxy_connections_rejected_total", map[string]string{"reason": "request_during_reauthentication"})
			if got-before != want {
				t.Fatalf("request_during_reauthentication counted %v times, want %v", got-before, want)
			}
		})
	}
}
