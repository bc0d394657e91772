package recordcheck

import (
	"bytes"
	"compress/gzip"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gzipped is raw in gzip, by the standard library (a second encoder).
func gzipped(t testing.TB, raw []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// junk is n deterministic random bytes.
func junk(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// overrun is two records whose last length varint claims 40 bytes more
// than the batch holds.
func overrun() []byte {
	first, last := record(0, []byte("first")), record(1, []byte("last"))
	last[0] += 80 // zig-zag: +40; still one byte
	return append(first, last...)
}

// TestProbeShapes: each shape that made acknowledged records unreadable
// behind the proxy (issue 31's table) is refused with Kafka's code, and
// valid batches of every codec pass.
func TestProbeShapes(t *testing.T) {
	hdrs := record(0, []byte("v"))
	hdrs[len(hdrs)-1] = 0 // replaced below: header count varint 1,000,000
	millionHeaders := append(hdrs[:len(hdrs)-1:len(hdrs)-1], 0x80, 0x89, 0x7a)
	millionHeaders[0] += 4 // the record's length grows by the 2 extra varint bytes
	cases := []struct {
		name   string
		batch  []byte
		reason Reason
		code   int16
	}{
		{"count 5, one record", framed(codecNone, 5, 4, records(1, 10)), RecordsCount, kerr.InvalidRecord.Code},
		{"count 1, two records", framed(codecNone, 1, 0, records(2, 10)), RecordsCount, kerr.InvalidRecord.Code},
		{"last varint length past the batch", framed(codecNone, 2, 1, overrun()), RecordBody, kerr.InvalidRecord.Code},
		{"random gzip payload", framed(codecGzip, 1, 0, junk(200, 1)), Decompress, kerr.UnknownServerError.Code},
		{"random snappy payload", framed(codecSnappy, 1, 0, junk(200, 2)), Decompress, kerr.UnknownServerError.Code},
		{"random lz4 payload", framed(codecLz4, 1, 0, junk(200, 3)), Decompress, kerr.UnknownServerError.Code},
		{"random zstd payload", framed(codecZstd, 1, 0, junk(200, 4)), Decompress, kerr.UnknownServerError.Code},
		{"gzip of junk", framed(codecGzip, 3, 2, gzipped(t, junk(300, 5))), RecordBody, kerr.InvalidRecord.Code},
		{"gzip with fewer records than its count", framed(codecGzip, 5, 4, gzipped(t, records(3, 10))), RecordsCount, kerr.InvalidRecord.Code},
		{"count 2^31-1", framed(codecNone, math.MaxInt32, math.MaxInt32-1, record(0, []byte("x"))), RecordsCount, kerr.InvalidRecord.Code},
		{"count 2^31-1 gzip", framed(codecGzip, math.MaxInt32, math.MaxInt32-1, gzipped(t, record(0, []byte("x")))), RecordsCount, kerr.InvalidRecord.Code},
		{"header count 1,000,000", framed(codecNone, 1, 0, millionHeaders), RecordBody, kerr.InvalidRecord.Code},
		{"inner offsets 0 and 1000 in gzip", framed(codecGzip, 2, 1, gzipped(t, append(record(0, []byte("a")), record(1000, []byte("b"))...))), OffsetDeltas, kerr.InvalidRecord.Code},
		{"inner offsets 0 and 1000", framed(codecNone, 2, 1, append(record(0, []byte("a")), record(1000, []byte("b"))...)), OffsetDeltas, kerr.InvalidRecord.Code},
		{"inner offsets from 1", framed(codecNone, 2, 1, append(record(1, []byte("a")), record(2, []byte("b"))...)), OffsetDeltas, kerr.InvalidRecord.Code},
		{"truncated gzip", framed(codecGzip, 3, 2, func() []byte { g := gzipped(t, records(3, 100)); return g[:len(g)/2] }()), RecordsCount, kerr.InvalidRecord.Code},
		{"empty gzip payload", framed(codecGzip, 1, 0, nil), Decompress, kerr.UnknownServerError.Code},
		{"record body longer than its fields", framed(codecNone, 1, 0, func() []byte { r := append(record(0, []byte("v")), 0); r[0] += 2; return r }()), RecordBody, kerr.InvalidRecord.Code},
		{"record body shorter than its fields", framed(codecNone, 1, 0, func() []byte { r := record(0, []byte("vv")); r[0] -= 2; return r }()), RecordBody, kerr.InvalidRecord.Code},
		{"null header key", framed(codecNone, 1, 0, nullHeaderKey()), RecordBody, kerr.InvalidRecord.Code},
		{"value length past the record", framed(codecNone, 1, 0, func() []byte { r := record(0, []byte("vv")); r[len(r)-4] += 8; return r }()), RecordBody, kerr.InvalidRecord.Code},
		{"six-byte varint", framed(codecNone, 1, 0, []byte{0x0e, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), RecordBody, kerr.InvalidRecord.Code},
	}
	for _, c := range codecs {
		cases = append(cases, struct {
			name   string
			batch  []byte
			reason Reason
			code   int16
		}{"valid " + c.name, valid(t, c.codec, 20, 100), None, 0})
	}
	cases = append(cases, struct {
		name   string
		batch  []byte
		reason Reason
		code   int16
	}{"valid xerial snappy", framed(codecSnappy, 300, 299, xerialFramed(records(300, 200), 32<<10)), None, 0})
	full := checker(t, Full, 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := full.Check(9, false, c.batch)
			if got.Reason != c.reason || got.Code != c.code {
				t.Fatalf("Check = %v (%v), want %v (%v)", got.Reason, kerr.ErrorForCode(got.Code), c.reason, kerr.ErrorForCode(c.code))
			}
		})
	}
}

// nullHeaderKey is one record with a header whose key length is -1.
func nullHeaderKey() []byte {
	r := record(0, []byte("v"), kmsg.Header{Key: "k", Value: []byte("x")})
	// The header is the last 5 bytes: count 1 (0x02), key length 1 (0x02),
	// "k", value length 1 (0x02), "x". Make the key null and drop "k".
	out := append(r[:len(r)-4:len(r)-4], 0x01, 0x02, 'x')
	out[0] -= 2
	return out
}

// TestDecompressionBomb: a batch that decompresses past the bound is
// refused at the bound, for every codec.
func TestDecompressionBomb(t *testing.T) {
	const bound = 64 << 10
	c := checker(t, Full, bound)
	big := records(200, 1000) // ~200 KiB: three times the bound
	for _, cd := range codecs[1:] {
		t.Run(cd.name, func(t *testing.T) {
			b := framed(cd.codec, 200, 199, compress(t, cd.codec, big))
			if got := c.Check(9, false, b); got.Reason != TooLarge || got.Code != kerr.MessageTooLarge.Code {
				t.Fatalf("Check = %+v, want TooLarge / MESSAGE_TOO_LARGE", got)
			}
			small := valid(t, cd.codec, 20, 1000) // ~20 KiB: under the bound
			if got := c.Check(9, false, small); !got.OK() {
				t.Fatalf("refused a batch under the bound: %+v", got)
			}
		})
	}
	t.Run("xerial", func(t *testing.T) {
		b := framed(codecSnappy, 200, 199, xerialFramed(big, 32<<10))
		if got := c.Check(9, false, b); got.Reason != TooLarge {
			t.Fatalf("Check = %+v, want TooLarge", got)
		}
	})
}

// TestBatchRecords: the seam for a caller that works on validated
// records: CheckBatch hands back the decompressed records, and Records
// walks them to each value.
func TestBatchRecords(t *testing.T) {
	c := checker(t, Full, 0)
	for _, cd := range codecs {
		t.Run(cd.name, func(t *testing.T) {
			var raw []byte
			for i := range 30 {
				raw = append(raw, record(int32(i), bytes.Repeat([]byte{byte('a' + i%26)}, i), kmsg.Header{Key: "h", Value: []byte("x")})...)
			}
			var b Batch
			defer b.Release()
			if r := c.CheckBatch(9, false, framed(cd.codec, 30, 29, compress(t, cd.codec, raw)), &b); !r.OK() {
				t.Fatalf("refused: %+v", r)
			}
			if b.Count != 30 || b.Codec != cd.codec || len(b.Header) != 61 {
				t.Fatalf("batch count %d codec %d header %d bytes", b.Count, b.Codec, len(b.Header))
			}
			it := b.Records()
			var rec Record
			n := 0
			for it.Next(&rec) {
				v := b.Data[rec.Value.Off : rec.Value.Off+rec.Value.Len]
				if want := bytes.Repeat([]byte{byte('a' + n%26)}, n); !bytes.Equal(v, want) || rec.OffsetDelta != int32(n) || rec.NumHeaders != 1 {
					t.Fatalf("record %d: value %q delta %d headers %d", n, v, rec.OffsetDelta, rec.NumHeaders)
				}
				n++
			}
			if it.Err() != None || n != 30 {
				t.Fatalf("walked %d records, err %v", n, it.Err())
			}
		})
	}
}
