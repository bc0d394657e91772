// This file builds record batches for the tests: the records as kmsg
// encodes them, compressed by franz-go's own compressor, framed and given
// their CRC-32C, so that only what a test changes is wrong.

package recordcheck

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

// codecs names the codecs a test runs for, by attribute value.
var codecs = []struct {
	name  string
	codec uint8
}{{"none", codecNone}, {"gzip", codecGzip}, {"snappy", codecSnappy}, {"lz4", codecLz4}, {"zstd", codecZstd}}

// record is one encoded record: offset delta, value, and headers.
func record(delta int32, value []byte, headers ...kmsg.Header) []byte {
	r := kmsg.NewRecord()
	r.OffsetDelta, r.Value, r.Headers = delta, value, headers
	r.Length = int32(len(r.AppendTo(nil)) - 1) // after a 1-byte length; fixed below when longer
	for {
		enc := r.AppendTo(nil)
		_, n := binary.Varint(enc)
		if want := int32(len(enc) - n); want == r.Length {
			return enc
		} else {
			r.Length = want
		}
	}
}

// records is n records with values of size bytes and deltas 0..n-1.
func records(n, size int) []byte {
	var out []byte
	v := bytes.Repeat([]byte("v"), size)
	for i := range n {
		out = append(out, record(int32(i), v)...)
	}
	return out
}

// compress compresses raw with franz-go's compressor for codec (none:
// raw itself); snappy comes out as one raw block, as franz-go sends it.
func compress(t testing.TB, codec uint8, raw []byte) []byte {
	t.Helper()
	var c kgo.CompressionCodec
	switch codec {
	case codecNone:
		return raw
	case codecGzip:
		c = kgo.GzipCompression()
	case codecSnappy:
		c = kgo.SnappyCompression()
	case codecLz4:
		c = kgo.Lz4Compression()
	case codecZstd:
		c = kgo.ZstdCompression()
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		t.Fatal(err)
	}
	out, got := comp.Compress(new(bytes.Buffer), raw)
	if uint8(got) != codec {
		t.Fatalf("compressed with codec %d, want %d", got, codec)
	}
	return bytes.Clone(out)
}

// xerialFramed is raw in the xerial snappy framing the Java client
// writes, in chunks of at most chunk bytes.
func xerialFramed(raw []byte, chunk int) []byte {
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

// framed is a non-idempotent batch of codec with the given count and last
// offset delta around payload (the records, compressed as codec says),
// its length and CRC-32C right.
func framed(codec uint8, count, lastDelta int32, payload []byte) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec),
		LastOffsetDelta: lastDelta, FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: payload,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[kwire.BatchOffLength:], uint32(len(raw)-kwire.BatchLogOverhead))
	binary.BigEndian.PutUint32(raw[kwire.BatchOffCRC:], kwire.BatchCRC(raw))
	return raw
}

// valid is a valid batch of n records of size bytes, compressed by codec.
func valid(t testing.TB, codec uint8, n, size int) []byte {
	return framed(codec, int32(n), int32(n-1), compress(t, codec, records(n, size)))
}

// checker is a Checker at level l, closed at the test's end.
func checker(t testing.TB, l Level, maxBytes int) *Checker {
	t.Helper()
	c, err := New(Config{Level: l, MaxBatchBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
