package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kproxy/kproxy/internal/devcert"
)

// TestSASLAndTLSToBrokers: franz-go's kfake, an independent Kafka, demands
// TLS and SASL; the pool authenticates with each mechanism and is refused
// with a wrong password.
func TestSASLAndTLSToBrokers(t *testing.T) {
	ca, err := devcert.NewCA("kfake CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pkix.Name{CommonName: "kfake"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "pw-plain"),
		kfake.Superuser("SCRAM-SHA-256", "admin", "pw-256"),
		kfake.Superuser("SCRAM-SHA-512", "admin", "pw-512"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	tlsFor := func(host string) *tls.Config {
		return &tls.Config{RootCAs: ca.Pool(), ServerName: host, MinVersion: tls.VersionTLS12}
	}

	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		ok   bool
	}{
		{"PLAIN", plain.Auth{User: "admin", Pass: "pw-plain"}.AsMechanism(), true},
		{"SCRAM-SHA-256", scram.Auth{User: "admin", Pass: "pw-256"}.AsSha256Mechanism(), true},
		{"SCRAM-SHA-512", scram.Auth{User: "admin", Pass: "pw-512"}.AsSha512Mechanism(), true},
		{"SCRAM-SHA-512 wrong password", scram.Auth{User: "admin", Pass: "nope"}.AsSha512Mechanism(), false},
		{"no SASL", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &resolver{}
			res.set(1, kf.ListenAddrs()[0])
			p, _ := newTestPool(t, Config{TLS: tlsFor, SASL: tc.mech}, res)
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			defer cancel()
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			pend, err := p.Send(ctx, 1, 0, Request{Key: 3, Version: 12, Body: Raw(req.AppendTo(nil))})
			var body []byte
			if err == nil {
				body, err = pend.Wait(ctx)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("served without valid credentials")
				}
				return
			}
			if err != nil {
				t.Fatalf("metadata through TLS and SASL: %v", err)
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 12
			if err := resp.ReadFrom(body); err != nil || len(resp.Brokers) != 1 {
				t.Fatalf("metadata answer: %v, %d brokers", err, len(resp.Brokers))
			}
			pend.Release()
		})
	}
}
