package crypt

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

const minimalFile = `
kms:
  type: aws
  endpoint: http://127.0.0.1:4566
  region: us-east-1
topics:
  - match: "secret-*"
    key: alias/kproxy-test
`

// newService is a Service on a file with extra appended to minimalFile,
// with kms and clk.
func newService(t testing.TB, kms KMS, clk *clock, extra string) *Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enc.yaml")
	if err := os.WriteFile(path, []byte(minimalFile+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{File: path, KMS: kms}
	if clk != nil {
		cfg.Now = clk.now
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.codecs.close)
	return s
}

var codecNames = map[int8]string{codecNone: "none", codecGzip: "gzip", codecSnappy: "snappy", codecLz4: "lz4", codecZstd: "zstd"}

func sampleRecords() []rec {
	big := bytes.Repeat([]byte("two mebibytes of plaintext "), (2<<20)/27+1)
	return []rec{
		{key: []byte("k1"), value: []byte("plaintext-alpha")},
		{key: []byte("k2"), value: nil}, // a tombstone
		{key: nil, value: []byte{}},
		{key: []byte("k4"), value: []byte("plaintext-beta"), headers: []kmsg.Header{{Key: "h", Value: []byte("header-clear")}, {Key: "n", Value: nil}}},
		{key: []byte("k5"), value: big},
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	kms := newMemKMS()
	s := newService(t, kms, nil, "")
	for codec, name := range codecNames {
		t.Run(name, func(t *testing.T) {
			recs := sampleRecords()
			in := buildBatch(t, s.codecs, codec, recs...)
			enc, code := encrypt(s, "secret-a", in)
			if code != 0 {
				t.Fatalf("encrypt: code %d", code)
			}
			hdr, stored := readBatch(t, s.codecs, enc)
			want, _ := readBatch(t, s.codecs, in)
			if hdr.Attributes != want.Attributes || hdr.ProducerID != 7 || hdr.ProducerEpoch != 3 || hdr.FirstSequence != 11 ||
				hdr.FirstTimestamp != want.FirstTimestamp || hdr.MaxTimestamp != want.MaxTimestamp || hdr.NumRecords != want.NumRecords ||
				hdr.PartitionLeaderEpoch != want.PartitionLeaderEpoch || hdr.LastOffsetDelta != want.LastOffsetDelta {
				t.Fatalf("header changed: %+v, want %+v", hdr, want)
			}
			for i, r := range stored {
				if recs[i].value == nil {
					if r.Value != nil || len(r.Headers) != 0 {
						t.Fatalf("tombstone %d changed: %+v", i, r)
					}
					continue
				}
				if len(recs[i].value) > 0 && bytes.Contains(r.Value, recs[i].value[:min(12, len(recs[i].value))]) {
					t.Fatalf("record %d stored in plaintext", i)
				}
				if len(r.Value) != len(recs[i].value)+TagSize {
					t.Fatalf("record %d: stored value of %d bytes for %d", i, len(r.Value), len(recs[i].value))
				}
				if last := r.Headers[len(r.Headers)-1]; last.Key != HeaderKey || !bytes.Equal(r.Key, recs[i].key) {
					t.Fatalf("record %d: headers %v key %q", i, r.Headers, r.Key)
				}
			}
			dec, code := s.Decrypt(context.Background(), "secret-a", 0, enc)
			if code != 0 {
				t.Fatalf("decrypt: code %d", code)
			}
			_, got := readBatch(t, s.codecs, dec)
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].value) || (r.Value == nil) != (recs[i].value == nil) || !bytes.Equal(r.Key, recs[i].key) ||
					len(r.Headers) != len(recs[i].headers) {
					t.Fatalf("record %d after the round trip: %q %d headers", i, r.Value[:min(len(r.Value), 20)], len(r.Headers))
				}
				for j, h := range r.Headers {
					if h.Key != recs[i].headers[j].Key || !bytes.Equal(h.Value, recs[i].headers[j].Value) {
						t.Fatalf("record %d header %d: %v", i, j, h)
					}
				}
			}
		})
	}
	if n := kms.gens.Load(); n != 1 {
		t.Fatalf("%d DEKs generated, want 1", n)
	}
	if n := kms.decrypts.Load(); n != 0 {
		t.Fatalf("%d KMS decrypts for the replica's own DEK, want 0", n)
	}
}

func TestUnencryptedTopicsUntouched(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("v")})
	if s.Encrypted("public") || !s.Encrypted("secret-x") {
		t.Fatal("Encrypted disagrees with the rules")
	}
	if _, rewritten, code := s.Encrypt(context.Background(), nil, "public", 0, in); rewritten || code != 0 {
		t.Fatal("an unencrypted topic's records were encrypted")
	}
	if out, code := s.Decrypt(context.Background(), "public", 0, in); code != 0 || &out[0] != &in[0] || len(out) != len(in) {
		t.Fatal("an unencrypted topic's records were rewritten on fetch")
	}
}

func TestPlaintextRecordsPassOnFetch(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	for codec, name := range codecNames {
		in := buildBatch(t, s.codecs, codec, rec{value: []byte{0x01, 'k', 'p'}}, rec{value: nil})
		out, code := s.Decrypt(context.Background(), "secret-a", 0, in)
		if code != 0 || !bytes.Equal(out, in) {
			t.Fatalf("%s: a plaintext batch changed on fetch (code %d)", name, code)
		}
	}
}

// valueAt is the offset in an uncompressed batch of the first byte of
// record i's value.
func valueAt(t *testing.T, b []byte, i int) int {
	it := recordcheck.NewRecords(b[kwire.BatchHeaderLen:])
	var w recordcheck.Record
	for range i + 1 {
		if !it.Next(&w) {
			t.Fatalf("no record %d: %s", i, it.Err())
		}
	}
	return kwire.BatchHeaderLen + w.Value.Off
}

func TestTamperedAndForeignRecordsFail(t *testing.T) {
	kms := newMemKMS()
	s := newService(t, kms, nil, "")
	in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("plaintext-alpha")}, rec{value: []byte("plaintext-beta")})
	enc, _ := encrypt(s, "secret-a", in)
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[kwire.BatchOffCRC:], kwire.BatchCRC(b))
		return b
	}
	flip := func(off int) func([]byte) []byte {
		return func(b []byte) []byte { b[off] ^= 1; return b }
	}
	v := valueAt(t, enc, 1)
	other := newService(t, newMemKMS(), nil, "") // a KMS that never made the DEK
	cases := []struct {
		name string
		s    *Service
		edit func([]byte) []byte
		want int16
	}{
		{"value byte flipped, CRC fixed", s, func(b []byte) []byte { return recrc(flip(v + 3)(b)) }, kerr.CorruptMessage.Code},
		{"tag byte flipped, CRC fixed", s, func(b []byte) []byte { return recrc(flip(v + 15 + TagSize)(b)) }, kerr.CorruptMessage.Code},
		{"value byte flipped", s, flip(v + 3), kerr.CorruptMessage.Code},
		{"format version", s, func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte(HeaderKey)) + len(HeaderKey) + 2 // key, then the value's length varint
			b[i] = FormatVersion + 1
			return recrc(b)
		}, kerr.CorruptMessage.Code},
		{"wrong key", other, func(b []byte) []byte { return b }, kerr.CorruptMessage.Code},
		{"untouched", s, func(b []byte) []byte { return b }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := c.s.Decrypt(context.Background(), "secret-a", 0, c.edit(bytes.Clone(enc)))
			if code != c.want {
				t.Fatalf("code %d, want %d", code, c.want)
			}
			if code != 0 && out != nil {
				t.Fatal("records returned with an error")
			}
		})
	}
}

func TestReservedHeaderRefused(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("v"), headers: []kmsg.Header{{Key: HeaderKey, Value: []byte{1}}}})
	if _, code := encrypt(s, "secret-a", in); code != kerr.InvalidRecord.Code {
		t.Fatalf("code %d, want INVALID_RECORD", code)
	}
}

func TestOtherReplicaDecryptsWithOneKMSCallPerDEK(t *testing.T) {
	kms := newMemKMS() // the KMS both replicas share
	a, b := newService(t, kms, nil, ""), newService(t, kms, nil, "")
	in := buildBatch(t, a.codecs, codecLz4, rec{value: []byte("plaintext-alpha")}, rec{value: []byte("plaintext-beta")})
	for range 3 {
		enc, _ := encrypt(a, "secret-a", in)
		if _, code := b.Decrypt(context.Background(), "secret-a", 0, enc); code != 0 {
			t.Fatalf("replica b: code %d", code)
		}
	}
	if g, d := kms.gens.Load(), kms.decrypts.Load(); g != 1 || d != 1 {
		t.Fatalf("KMS calls: %d generate, %d decrypt; want 1 and 1", g, d)
	}
}

func TestDEKLimits(t *testing.T) {
	kms := newMemKMS()
	clk := &clock{t: time.Unix(1700000000, 0)}
	s := newService(t, kms, clk, "dek:\n  max_encryptions: 4\n")
	in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("a")}, rec{value: []byte("b")})
	produce := func() int16 { _, c := encrypt(s, "secret-a", in); return c }
	steps := []struct {
		name        string
		advance     time.Duration
		down        bool
		want        int16
		wantGens    int64
		sameWrapped bool // the DEK is the one the step before used
	}{
		{"first DEK", 0, false, 0, 1, false},
		{"KMS down, not due", time.Minute, true, 0, 1, true},
		{"max encryptions: a new DEK", 0, false, 0, 2, false},
		{"reused", time.Minute, false, 0, 2, true},
		{"refresh after 1h", time.Hour, false, 0, 3, false},
		{"KMS down past refresh: the old DEK serves", time.Hour + time.Minute, true, 0, 4, true},
		{"KMS down past expiry: retriable error", time.Hour, true, kerr.KafkaStorageError.Code, 5, false},
		{"KMS down, soon after: no new call", time.Second, true, kerr.KafkaStorageError.Code, 5, false},
		{"KMS back", 10 * time.Second, false, 0, 6, false},
	}
	var last []byte
	for _, st := range steps {
		clk.add(st.advance)
		kms.down.Store(st.down)
		if got := produce(); got != st.want {
			t.Fatalf("%s: code %d, want %d", st.name, got, st.want)
		}
		if g := kms.gens.Load(); g != st.wantGens {
			t.Fatalf("%s: %d GenerateDataKey calls, want %d", st.name, g, st.wantGens)
		}
		s.keys.mu.Lock()
		cur := s.keys.byKEK["alias/kproxy-test"].cur.wrapped
		s.keys.mu.Unlock()
		if st.want == 0 && bytes.Equal(cur, last) != st.sameWrapped {
			t.Fatalf("%s: same DEK %v, want %v", st.name, bytes.Equal(cur, last), st.sameWrapped)
		}
		last = cur
	}
}

func TestKeyRefusedRejectOrPassthrough(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  int16
	}{{"", kerr.PolicyViolation.Code}, {"unresolved_key: passthrough\n", 0}} {
		kms := newMemKMS()
		kms.refuse.Store(true)
		s := newService(t, kms, nil, c.extra)
		in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("v")})
		out, code := encrypt(s, "secret-a", in)
		if code != c.want || (code == 0 && !bytes.Equal(out, in)) {
			t.Fatalf("%q: code %d, want %d", c.extra, code, c.want)
		}
	}
}

func TestReloadSwapsRulesAndKeepsABadFileOut(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	steps := []struct {
		name    string
		file    string
		changed bool
		wantErr bool
		secret  bool // is secret-a encrypted after the step
		other   bool // is other encrypted after the step
	}{
		{"unchanged", minimalFile, false, false, true, false},
		{"a rule added", minimalFile + "  - match: other\n    key: alias/{topic}\n", true, false, true, true},
		{"a misspelt field", minimalFile + "unresolved_keys: passthrough\n", true, true, true, true},
		{"a bad glob", "kms: {type: aws, region: r}\ntopics:\n  - {match: \"[\", key: k}\n", true, true, true, true},
		{"the rule removed", strings.Replace(minimalFile, "secret-*", "public-*", 1), true, false, false, false},
	}
	for _, st := range steps {
		if err := os.WriteFile(s.cfg.File, []byte(st.file), 0o600); err != nil {
			t.Fatal(err)
		}
		changed, err := s.reload(context.Background())
		if changed != st.changed || (err != nil) != st.wantErr {
			t.Fatalf("%s: changed %v, err %v", st.name, changed, err)
		}
		if s.Encrypted("secret-a") != st.secret || s.Encrypted("other") != st.other {
			t.Fatalf("%s: secret-a %v, other %v", st.name, s.Encrypted("secret-a"), s.Encrypted("other"))
		}
	}
	if kek, _ := s.cur.Load().pol.kek("public-x"); kek != "alias/kproxy-test" {
		t.Fatalf("kek %q", kek)
	}
}

func TestTopicRulesFirstMatchWins(t *testing.T) {
	f, err := ParseFile([]byte(minimalFile + "  - match: secret-exact\n    key: alias/exact\n  - match: \"pay?\"\n    key: alias/{topic}-kek\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := compile(f)
	for topic, want := range map[string]string{
		"secret-exact": "alias/kproxy-test", // the glob comes first
		"pays":         "alias/pays-kek",
		"payments":     "",
		"public":       "",
	} {
		if got, ok := p.kek(topic); got != want || ok != (want != "") {
			t.Fatalf("%s: kek %q %v, want %q", topic, got, ok, want)
		}
	}
}

func TestLegacyMessageSetRefusedOnProduce(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	in := buildBatch(t, s.codecs, codecNone, rec{value: []byte("plaintext")})
	in[kwire.BatchOffMagic] = 1
	if _, code := encrypt(s, "secret-a", in); code != kerr.InvalidRecord.Code {
		t.Fatalf("code %d, want INVALID_RECORD", code)
	}
	if out, code := s.Decrypt(context.Background(), "secret-a", 0, in); code != 0 || !bytes.Equal(out, in) {
		t.Fatalf("fetch of a legacy message set: code %d", code)
	}
}

func TestTransactionalKeptControlUntouched(t *testing.T) {
	s := newService(t, newMemKMS(), nil, "")
	withAttrs := func(b []byte, attrs uint16) []byte {
		binary.BigEndian.PutUint16(b[kwire.BatchOffAttributes:], attrs)
		binary.BigEndian.PutUint32(b[kwire.BatchOffCRC:], kwire.BatchCRC(b))
		return b
	}
	txn := withAttrs(buildBatch(t, s.codecs, codecNone, rec{value: []byte("plaintext in a transaction")}), kwire.BatchAttrTransactional)
	enc, code := encrypt(s, "secret-a", txn)
	if code != 0 || bytes.Equal(enc, txn) {
		t.Fatalf("transactional batch: code %d, encrypted %v", code, !bytes.Equal(enc, txn))
	}
	if got := binary.BigEndian.Uint16(enc[kwire.BatchOffAttributes:]); got != kwire.BatchAttrTransactional {
		t.Fatalf("attributes %#x after encryption, want the transactional bit alone", got)
	}
	control := withAttrs(buildBatch(t, s.codecs, codecNone, rec{key: []byte{0, 0, 0, 1}, value: []byte{0, 0, 0, 0, 0, 0}}),
		kwire.BatchAttrTransactional|kwire.BatchAttrControl)
	for _, f := range []func([]byte) ([]byte, int16){
		func(b []byte) ([]byte, int16) { return encrypt(s, "secret-a", b) },
		func(b []byte) ([]byte, int16) { return s.Decrypt(context.Background(), "secret-a", 0, b) },
	} {
		if out, code := f(bytes.Clone(control)); code != 0 || !bytes.Equal(out, control) {
			t.Fatalf("control batch changed (code %d)", code)
		}
	}
}
