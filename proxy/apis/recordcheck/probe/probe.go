// Package probe builds record batches for tests of produce validation:
// valid ones of every codec, with franz-go's own encoder and compressor,
// and the hostile shapes of issue 31's probe, each with the Kafka code
// level Full answers it. It is imported by tests only; its limit is that
// it panics on a builder's own failure (never on the shapes' content).
package probe

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codecs, by attribute value.
const (
	None   uint8 = 0
	Gzip   uint8 = 1
	Snappy uint8 = 2
	Lz4    uint8 = 3
	Zstd   uint8 = 4
)

// Codec is one codec's name and attribute value.
type Codec struct {
	Name string
	ID   uint8
}

// Codecs lists every codec, none first.
func Codecs() []Codec {
	return []Codec{{"none", None}, {"gzip", Gzip}, {"snappy", Snappy}, {"lz4", Lz4}, {"zstd", Zstd}}
}

// Record is one encoded record with offset delta delta, value and headers.
func Record(delta int32, value []byte, headers ...kmsg.Header) []byte {
	r := kmsg.NewRecord()
	r.OffsetDelta, r.Value, r.Headers = delta, value, headers
	for {
		enc := r.AppendTo(nil)
		_, n := binary.Varint(enc)
		want := int32(len(enc) - n)
		if want == r.Length {
			return enc
		}
		r.Length = want
	}
}

// Records is n records of values prefix-i, offset deltas 0..n-1.
func Records(n int, prefix string) []byte {
	var out []byte
	for i := range n {
		out = append(out, Record(int32(i), []byte(prefix+"-"+strconv.Itoa(i)))...)
	}
	return out
}

// Sized is n records of size-byte values and deltas 0..n-1.
func Sized(n, size int) []byte {
	var out []byte
	v := bytes.Repeat([]byte("v"), size)
	for i := range n {
		out = append(out, Record(int32(i), v)...)
	}
	return out
}

// Compress is raw compressed by franz-go's compressor for codec (None:
// raw); snappy is one raw block, as franz-go sends it.
func Compress(codec uint8, raw []byte) []byte {
	var c kgo.CompressionCodec
	switch codec {
	case None:
		return raw
	case Gzip:
		c = kgo.GzipCompression()
	case Snappy:
		c = kgo.SnappyCompression()
	case Lz4:
		c = kgo.Lz4Compression()
	case Zstd:
		c = kgo.ZstdCompression()
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		panic(err)
	}
	out, got := comp.Compress(new(bytes.Buffer), raw)
	if uint8(got) != codec {
		panic("probe: franz-go compressed with another codec")
	}
	return bytes.Clone(out)
}

// Gzipped is raw in gzip by the standard library (a second encoder).
func Gzipped(raw []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(raw); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// xerialMagic starts the xerial framing of the Java client's snappy.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Xerial is raw in the xerial snappy framing the Java client writes, in
// chunks of at most chunk bytes.
func Xerial(raw []byte, chunk int) []byte {
	out := append(bytes.Clone(xerialMagic), 0, 0, 0, 1, 0, 0, 0, 1)
	for len(raw) > 0 {
		n := min(chunk, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Framed is a non-idempotent batch of codec with count and last offset
// delta around payload (the records, compressed as codec says), its
// length and CRC-32C right.
func Framed(codec uint8, count, lastDelta int32, payload []byte) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec),
		LastOffsetDelta: lastDelta, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: payload,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	FixCRC(raw)
	return raw
}

// FixCRC sets the CRC-32C of batch b to match its bytes.
func FixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
}

// Valid is a valid batch of n records (values prefix-i) in codec.
func Valid(codec uint8, n int, prefix string) []byte {
	return Framed(codec, int32(n), int32(n-1), Compress(codec, Records(n, prefix)))
}

// Junk is n deterministic random bytes.
func Junk(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Shape is one hostile batch and how level Full answers it: Kafka's code
// and the kproxy_bad_input_total reason.
type Shape struct {
	Name    string
	Records []byte
	Code    int16
	Reason  string
}

// Shapes are the hostile shapes of issue 31's probe table, and more of the
// same kind: each left a partition unreadable behind a trusting broker.
func Shapes() []Shape {
	inv, unk := kerr.InvalidRecord.Code, kerr.UnknownServerError.Code
	two := append(Record(0, []byte("a")), Record(1000, []byte("b"))...)
	return []Shape{
		{"count 5, one record", Framed(None, 5, 4, Records(1, "c5")), inv, "produce_records_count"},
		{"count 1, two records", Framed(None, 1, 0, Records(2, "c1")), inv, "produce_records_count"},
		{"last varint length past the batch", Framed(None, 2, 1, overrun()), inv, "produce_record_body"},
		{"random gzip payload", Framed(Gzip, 1, 0, Junk(200, 1)), unk, "produce_decompress"},
		{"random snappy payload", Framed(Snappy, 1, 0, Junk(200, 2)), unk, "produce_decompress"},
		{"random lz4 payload", Framed(Lz4, 1, 0, Junk(200, 3)), unk, "produce_decompress"},
		{"random zstd payload", Framed(Zstd, 1, 0, Junk(200, 4)), unk, "produce_decompress"},
		{"gzip of junk", Framed(Gzip, 3, 2, Gzipped(Junk(300, 5))), inv, "produce_record_body"},
		{"gzip with fewer records than its count", Framed(Gzip, 5, 4, Gzipped(Records(3, "g"))), inv, "produce_records_count"},
		{"count 2^31-1", Framed(None, math.MaxInt32, math.MaxInt32-1, Record(0, []byte("x"))), inv, "produce_records_count"},
		{"header count 1,000,000", Framed(None, 1, 0, millionHeaders()), inv, "produce_record_body"},
		{"inner offsets 0 and 1000 in gzip", Framed(Gzip, 2, 1, Gzipped(two)), inv, "produce_offset_deltas"},
		{"inner offsets 0 and 1000", Framed(None, 2, 1, two), inv, "produce_offset_deltas"},
	}
}

// overrun is two records whose last length varint claims 40 bytes more
// than the batch holds.
func overrun() []byte {
	first, last := Record(0, []byte("first")), Record(1, []byte("last"))
	last[0] += 80 // zig-zag: +40; still one byte
	return append(first, last...)
}

// millionHeaders is one record whose header count is 1,000,000, with no
// header bytes.
func millionHeaders() []byte {
	r := Record(0, []byte("v"))
	r = append(r[:len(r)-1:len(r)-1], 0x80, 0x89, 0x7a) // varint 1,000,000 for count 0
	r[0] += 4                                           // the record grows by 2 bytes
	return r
}
