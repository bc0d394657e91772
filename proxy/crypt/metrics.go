package crypt

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/promreg"
)

type metrics struct {
	kmsCalls    *prometheus.CounterVec // op, result
	records     *prometheus.CounterVec // op: records encrypted or decrypted
	failures    *prometheus.CounterVec // op, topic, reason
	passthrough *prometheus.CounterVec // topic
	// decompressions: compressed batches encryption decompressed itself.
	decompressEncrypt, decompressDecrypt prometheus.Counter
}

// decompressed counts one compressed batch that encryption (encrypting)
// or decryption decompressed itself.
func (m *metrics) decompressed(encrypting bool) {
	switch {
	case m == nil:
	case encrypting:
		m.decompressEncrypt.Inc()
	default:
		m.decompressDecrypt.Inc()
	}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry() // kept, not exported
	}
	m := &metrics{
		kmsCalls: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_encryption_kms_calls_total",
			Help: "Calls to the KMS by operation (generate: a new DEK, decrypt: an unseen wrapped DEK) and result (ok, refused, unavailable).",
		}, []string{"op", "result"}),
		records: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_encryption_batches_total",
			Help: "Record batches of encrypted topics rewritten, by operation (encrypt on produce, decrypt on fetch).",
		}, []string{"op"}),
		failures: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_encryption_failures_total",
			Help: "Partitions of encrypted topics answered with an error, by operation (produce, fetch), topic and reason (unavailable, refused, auth, format).",
		}, []string{"op", "topic", "reason"}),
		passthrough: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_encryption_passthrough_total",
			Help: "Produce partitions written in plaintext because the KMS refused their key and unresolved_key is passthrough.",
		}, []string{"topic"}),
	}
	dec := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_encryption_decompressed_batches_total",
		Help: "Compressed batches of encrypted topics that encryption decompressed itself, by operation: encrypt (produce validation at level full hands on the records it decompressed, so this counts produce at a lower level) and decrypt (every compressed fetched batch).",
	}, []string{"op"})
	m.decompressEncrypt, m.decompressDecrypt = dec.WithLabelValues("encrypt"), dec.WithLabelValues("decrypt")
	for _, op := range []string{"generate", "decrypt"} {
		for _, r := range []string{"ok", "refused", "unavailable"} {
			m.kmsCalls.WithLabelValues(op, r)
		}
	}
	return m
}
