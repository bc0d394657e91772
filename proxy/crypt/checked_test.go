package crypt

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// EncryptChecked encrypts the records validation decompressed, without
// decompressing the batch again, when the Batch is of the bytes given; a
// Batch of other bytes is ignored. The checked records are swapped for
// others here, so which were encrypted shows after decryption.
func TestEncryptCheckedUsesValidatedRecords(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	chk, err := recordcheck.New(recordcheck.Config{Level: recordcheck.Full})
	if err != nil {
		t.Fatal(err)
	}
	defer chk.Close()
	sent := []rec{{value: []byte("sent-alpha")}, {value: []byte("sent-beta")}}
	// The DEK first: while one comes from the KMS, checked records are let
	// go (TestEncryptCheckedLetsGoBeforeKMS).
	if _, code := encrypt(s, "secret-a", buildBatch(t, s.codecs, codecNone, sent...)); code != 0 {
		t.Fatalf("first encrypt: code %d", code)
	}
	other := buildBatch(t, s.codecs, codecNone, rec{value: []byte("checked-gamma")}, rec{value: []byte("checked-delta")})[kwire.BatchHeaderLen:]
	for _, c := range []struct {
		name      string
		sameBytes bool // the Batch is of the bytes encrypted
		want      string
		own       float64 // batches encryption decompressed itself
	}{{"checked", true, "checked-", 0}, {"another batch's", false, "sent-", 1}} {
		t.Run(c.name, func(t *testing.T) {
			in := buildBatch(t, s.codecs, codecLz4, sent...)
			var b recordcheck.Batch
			defer b.Release()
			if r := chk.CheckBatch(9, false, in, &b); !r.OK() {
				t.Fatalf("check: %v", r.Reason)
			}
			b.Data = other
			if !c.sameBytes {
				b.Header = bytes.Clone(b.Header)
			}
			before := testutil.ToFloat64(s.m.decompressEncrypt)
			out, rewritten, code := s.EncryptChecked(context.Background(), nil, "secret-a", 0, in, &b)
			if !rewritten || code != 0 {
				t.Fatalf("encrypt: rewritten %v, code %d", rewritten, code)
			}
			if got := testutil.ToFloat64(s.m.decompressEncrypt) - before; got != c.own {
				t.Errorf("encryption decompressed %v batches itself, want %v", got, c.own)
			}
			dec, code := s.Decrypt(context.Background(), "secret-a", 0, out)
			if code != 0 {
				t.Fatalf("decrypt: code %d", code)
			}
			_, recs := readBatch(t, s.codecs, dec)
			for i, r := range recs {
				if !bytes.HasPrefix(r.Value, []byte(c.want)) {
					t.Errorf("record %d decrypts to %q, want %s...", i, r.Value, c.want)
				}
			}
		})
	}
}

// TestEncryptCheckedLetsGoBeforeKMS: while EncryptChecked waits for the
// KMS to make a DEK, the records validation decompressed no longer hold
// its budget: another produce's compressed batch passes validation during
// the call, which a budget of one batch could not allow otherwise. The
// records are then decompressed by encryption itself, and decrypt as
// sent.
func TestEncryptCheckedLetsGoBeforeKMS(t *testing.T) {
	kms := newMemKMS()
	s := newService(t, kms, nil, "")
	// Room for one 2 MiB batch's output (its buffer grows to 4 MiB), not two.
	chk, err := recordcheck.New(recordcheck.Config{Level: recordcheck.Full, MaxBatchBytes: 4 << 20, DecompressBudget: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer chk.Close()
	sent := sampleRecords()
	in := buildBatch(t, s.codecs, codecLz4, sent...)
	var b recordcheck.Batch
	defer b.Release()
	if r := chk.CheckBatch(9, false, in, &b); !r.OK() {
		t.Fatalf("check: %v", r.Reason)
	}
	var during *recordcheck.Reason // nil: no KMS call
	kms.during = func() {
		var other recordcheck.Batch
		r := chk.CheckBatch(9, false, buildBatch(t, s.codecs, codecLz4, sent...), &other).Reason
		other.Release()
		during = &r
	}
	before := testutil.ToFloat64(s.m.decompressEncrypt)
	out, rewritten, code := s.EncryptChecked(context.Background(), nil, "secret-a", 0, in, &b)
	if !rewritten || code != 0 {
		t.Fatalf("encrypt: rewritten %v, code %d", rewritten, code)
	}
	switch {
	case during == nil:
		t.Fatal("no KMS call for the first DEK")
	case *during != recordcheck.None:
		t.Fatalf("a produce validated during the KMS call: %v, want passed (the first batch's budget given back)", *during)
	}
	if got := testutil.ToFloat64(s.m.decompressEncrypt) - before; got != 1 {
		t.Errorf("encryption decompressed %v batches itself, want 1 (the checked records were let go)", got)
	}
	dec, code := s.Decrypt(context.Background(), "secret-a", 0, out)
	if code != 0 {
		t.Fatalf("decrypt: code %d", code)
	}
	if _, recs := readBatch(t, s.codecs, dec); !bytes.Equal(recs[4].Value, sent[4].value) {
		t.Fatal("the large record does not decrypt to what was sent")
	}
}
