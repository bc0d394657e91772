package recordcheck

import (
	"bytes"
	"math"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// TestProbeShapes: each shape that made acknowledged records unreadable
// behind the proxy (issue 31's table, package probe) is refused with
// Kafka's code, and so are more of the kind; valid batches of every codec
// pass.
func TestProbeShapes(t *testing.T) {
	type tc struct {
		name   string
		batch  []byte
		reason string
		code   int16
	}
	var cases []tc
	for _, s := range probe.Shapes() {
		cases = append(cases, tc{s.Name, s.Records, s.Reason, s.Code})
	}
	inv := kerr.InvalidRecord.Code
	cases = append(cases,
		tc{"count 2^31-1 gzip", framed(codecGzip, math.MaxInt32, math.MaxInt32-1, probe.Gzipped(record(0, []byte("x")))), RecordsCount.String(), inv},
		tc{"inner offsets from 1", framed(codecNone, 2, 1, append(record(1, []byte("a")), record(2, []byte("b"))...)), OffsetDeltas.String(), inv},
		tc{"truncated gzip", framed(codecGzip, 3, 2, func() []byte { g := probe.Gzipped(records(3, 100)); return g[:len(g)/2] }()), RecordsCount.String(), inv},
		tc{"empty gzip payload", framed(codecGzip, 1, 0, nil), Decompress.String(), kerr.UnknownServerError.Code},
		tc{"record body longer than its fields", framed(codecNone, 1, 0, func() []byte { r := append(record(0, []byte("v")), 0); r[0] += 2; return r }()), RecordBody.String(), inv},
		tc{"record body shorter than its fields", framed(codecNone, 1, 0, func() []byte { r := record(0, []byte("vv")); r[0] -= 2; return r }()), RecordBody.String(), inv},
		tc{"null header key", framed(codecNone, 1, 0, nullHeaderKey()), RecordBody.String(), inv},
		tc{"value length past the record", framed(codecNone, 1, 0, func() []byte { r := record(0, []byte("vv")); r[len(r)-4] += 8; return r }()), RecordBody.String(), inv},
		tc{"six-byte varint", framed(codecNone, 1, 0, []byte{0x0e, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), RecordBody.String(), inv},
		tc{"valid xerial snappy", framed(codecSnappy, 300, 299, probe.Xerial(records(300, 200), 32<<10)), "", 0},
		tc{"valid zstd stream without a content size", framed(codecZstd, 300, 299, zstdStreamed(t, records(300, 1000))), "", 0},
	)
	for _, c := range codecs {
		cases = append(cases, tc{"valid " + c.Name, valid(t, c.ID, 20, 100), "", 0})
	}
	full := checker(t, Full, 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkBoth(t, full, 9, false, c.batch)
			if got.Reason.String() != c.reason || got.Code != c.code {
				t.Fatalf("Check = %v (%v), want %q (%v)", got.Reason, kerr.ErrorForCode(got.Code), c.reason, kerr.ErrorForCode(c.code))
			}
		})
	}
}

// zstdStreamed is raw as a streaming zstd writer writes it, without the
// frame content size EncodeAll declares (as a Java client's stream).
func zstdStreamed(t *testing.T, raw []byte) []byte {
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(b.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("stream header: content size %v, %v", h.HasFCS, err)
	}
	return b.Bytes()
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
		t.Run(cd.Name, func(t *testing.T) {
			b := framed(cd.ID, 200, 199, compress(t, cd.ID, big))
			if got := c.Check(9, false, b); got.Reason != TooLarge || got.Code != kerr.MessageTooLarge.Code {
				t.Fatalf("Check = %+v, want TooLarge / MESSAGE_TOO_LARGE", got)
			}
			small := valid(t, cd.ID, 20, 1000) // ~20 KiB: under the bound
			if got := c.Check(9, false, small); !got.OK() {
				t.Fatalf("refused a batch under the bound: %+v", got)
			}
		})
	}
	for name, payload := range map[string][]byte{
		"xerial": probe.Xerial(big, 32<<10), "zstd stream": zstdStreamed(t, big),
	} {
		t.Run(name, func(t *testing.T) {
			codec := uint8(codecSnappy)
			if name == "zstd stream" {
				codec = codecZstd
			}
			if got := c.Check(9, false, framed(codec, 200, 199, payload)); got.Reason != TooLarge {
				t.Fatalf("Check = %+v, want TooLarge", got)
			}
		})
	}
}

// TestBatchRecords: the seam for a caller that works on validated
// records: CheckBatch hands back the decompressed records, and Records
// walks them to each value.
func TestBatchRecords(t *testing.T) {
	c := checker(t, Full, 0)
	for _, cd := range codecs {
		t.Run(cd.Name, func(t *testing.T) {
			var raw []byte
			for i := range 30 {
				raw = append(raw, record(int32(i), bytes.Repeat([]byte{byte('a' + i%26)}, i), kmsg.Header{Key: "h", Value: []byte("x")})...)
			}
			var b Batch
			defer b.Release()
			if r := c.CheckBatch(9, false, framed(cd.ID, 30, 29, compress(t, cd.ID, raw)), &b); !r.OK() {
				t.Fatalf("refused: %+v", r)
			}
			if b.Count != 30 || b.Codec != cd.ID || len(b.Header) != 61 {
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

// TestDecompressBudget: while one check holds its decompressed records,
// another that would pass the shared budget is refused (Busy,
// REQUEST_TIMED_OUT: clients retry) rather than allocated; once the first
// is released it passes, and every grant is given back.
func TestDecompressBudget(t *testing.T) {
	const bound = 256 << 10
	c, err := New(Config{Level: Full, MaxBatchBytes: bound, DecompressBudget: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, cd := range codecs[1:] {
		t.Run(cd.Name, func(t *testing.T) {
			b := valid(t, cd.ID, 150, 1000) // ~150 KiB of records: two do not fit
			var held Batch
			if r := c.CheckBatch(9, false, b, &held); !r.OK() {
				t.Fatalf("first check: %+v", r)
			}
			if r := c.Check(9, false, b); r.Reason != Busy || r.Code != kerr.RequestTimedOut.Code {
				t.Fatalf("second check while the first holds its records: %+v, want Busy / REQUEST_TIMED_OUT", r)
			}
			held.Release()
			if r := c.Check(9, false, b); !r.OK() {
				t.Fatalf("after release: %+v", r)
			}
			if !c.dec.mem.TryAcquire(bound) {
				t.Fatal("the budget was not all given back")
			}
			c.dec.mem.Release(bound)
		})
	}
}
