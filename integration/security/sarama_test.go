package security

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/testkit/saramascram"
)

// TestSaramaHandshakeVersions: SaslHandshake v0 (raw tokens after it) and
// v1 (SaslAuthenticate) both authenticate, with SCRAM and PLAIN.
func TestSaramaHandshakeVersions(t *testing.T) {
	env := startSASL(t, nil)
	for _, tc := range []struct {
		name    string
		version int16
		mech    sarama.SASLMechanism
	}{
		{"SCRAM-SHA-512 handshake v1", sarama.SASLHandshakeV1, sarama.SASLTypeSCRAMSHA512},
		{"SCRAM-SHA-512 handshake v0", sarama.SASLHandshakeV0, sarama.SASLTypeSCRAMSHA512},
		{"PLAIN handshake v0", sarama.SASLHandshakeV0, sarama.SASLTypePlaintext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, env.tls
			cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism, cfg.Net.SASL.Version = true, tc.mech, tc.version
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramascram.Client{Hash: scram.SHA512} }
			cfg.ApiVersionsRequest = tc.version != sarama.SASLHandshakeV0
			cfg.Producer.Return.Successes = true
			cfg.Net.DialTimeout, cfg.Net.ReadTimeout = 5*time.Second, 10*time.Second
			p, err := sarama.NewSyncProducer([]string{env.secure}, cfg)
			if err != nil {
				t.Fatalf("sarama producer: %v", err)
			}
			defer p.Close()
			for i := range 3 {
				if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder("v")}); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
		})
	}
}
