package apis

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kcodec"
	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
	"github.com/kproxy/kproxy/proxy/crypt"
)

// plainKMS is a KMS whose wrapped DEK is the DEK behind a prefix: enough
// for the produce path, which keeps its own DEKs in its cache.
type plainKMS struct{}

const plainKMSPrefix = "wrapped:"

func (plainKMS) GenerateDataKey(context.Context, string) ([]byte, []byte, error) {
	plain := make([]byte, 32)
	rand.Read(plain)
	return plain, append([]byte(plainKMSPrefix), plain...), nil
}

func (plainKMS) Decrypt(_ context.Context, wrapped []byte) ([]byte, error) {
	if !bytes.HasPrefix(wrapped, []byte(plainKMSPrefix)) {
		return nil, errors.New("plainKMS: not a DEK of mine")
	}
	return bytes.Clone(wrapped[len(plainKMSPrefix):]), nil
}

// encryptT is a crypt.Service that encrypts topic "t", its metrics in reg.
func encryptT(tb testing.TB, reg prometheus.Registerer) *crypt.Service {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "enc.yaml")
	file := "kms:\n  type: aws\n  endpoint: http://127.0.0.1:4566\n  region: us-east-1\ntopics:\n  - match: \"t\"\n    key: alias/kproxy-test\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		tb.Fatal(err)
	}
	s, err := crypt.New(context.Background(), crypt.Config{File: path, KMS: plainKMS{}, Registerer: reg})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// encryption is a Config mutation that encrypts topic "t" with s.
func encryption(s *crypt.Service) func(*Config) {
	return func(c *Config) { c.Encryption = s }
}

// TestProduceEncryptedDecompressesOnce: a compressed batch produced to an
// encrypted topic is decompressed once when validation is full (the
// records it decompressed are the ones encrypted) and by encryption itself
// at framing and off; at every level what reaches the broker decrypts to
// the records sent, for every codec.
func TestProduceEncryptedDecompressesOnce(t *testing.T) {
	raw := probe.Sized(50, 300)
	for _, codec := range probe.Codecs() {
		batch := probe.Framed(codec.ID, 50, 49, probe.Compress(codec.ID, raw))
		for _, c := range []struct {
			level recordcheck.Level
			own   float64 // compressed batches encryption decompresses itself
		}{{recordcheck.Full, 0}, {recordcheck.Framing, 1}, {recordcheck.Off, 1}} {
			if codec.ID == probe.None {
				c.own = 0
			}
			t.Run(codec.Name+"/"+c.level.String(), func(t *testing.T) {
				reg := prometheus.NewRegistry()
				svc := encryptT(t, reg)
				// The DEK first: while one comes from the KMS, encryption lets
				// validation's records go and decompresses them itself.
				if _, _, code := svc.Encrypt(context.Background(), nil, "t", 0, probe.Framed(probe.None, 1, 0, probe.Sized(1, 10))); code != 0 {
					t.Fatalf("first encrypt: code %d", code)
				}
				d, f, _ := newTestDispatcher(t, validation(c.level, badInputVec(), new(bytes.Buffer)), encryption(svc))
				resp := roundTrip(t, d, produceOf(-1, map[int32][]byte{0: batch})).(*kmsg.ProduceResponse)
				if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Fatalf("partition 0 answered %d", code)
				}
				if got := decompressedByEncryption(t, reg); got != c.own {
					t.Errorf("encryption decompressed %v batches itself, want %v", got, c.own)
				}
				checkSentDecrypts(t, svc, f, raw)
			})
		}
	}
}

// decompressedByEncryption is kproxy_encryption_decompressed_batches_total{op="encrypt"}.
func decompressedByEncryption(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_encryption_decompressed_batches_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "encrypt" {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatal("kproxy_encryption_decompressed_batches_total{op=\"encrypt\"} is not registered")
	return 0
}

// checkSentDecrypts checks that the one produce f received holds, for
// partition 0, records that are not raw but decrypt to raw.
func checkSentDecrypts(t *testing.T, svc *crypt.Service, f *fakeSender, raw []byte) {
	t.Helper()
	sent := f.requests(kmsg.Produce)
	if len(sent) != 1 {
		t.Fatalf("%d produce requests sent, want 1", len(sent))
	}
	stored := sent[0].req.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
	if got := batchRecords(t, stored); bytes.Equal(got, raw) {
		t.Fatal("the records reached the broker in plaintext")
	}
	fetched, code := svc.Decrypt(context.Background(), "t", 0, stored)
	if code != 0 {
		t.Fatalf("decrypt: code %d", code)
	}
	if got := batchRecords(t, fetched); !bytes.Equal(got, raw) {
		t.Errorf("the records decrypt to %d bytes that differ from the %d sent", len(got), len(raw))
	}
}

// batchRecords is the records of the one batch b, decompressed.
func batchRecords(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < kwire.BatchHeaderLen {
		t.Fatalf("a batch of %d bytes", len(b))
	}
	codec := b[kwire.BatchOffAttributes+1] & kwire.BatchAttrCodec
	if codec == kcodec.None {
		return b[kwire.BatchHeaderLen:]
	}
	d, err := kcodec.NewDecoders(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.Decompress(codec, nil, b[kwire.BatchHeaderLen:], &kcodec.Grant{})
	if err != nil {
		t.Fatalf("decompress codec %d: %v", codec, err)
	}
	return out
}
