package recordcheck

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

// FuzzAcceptedReadable builds a valid batch (codec, record count and value
// size from the input), mutates it (XORs at positions from the input,
// with the CRC-32C made right again when fixCRC is set, so that record
// faults get past the CRC) and checks the invariant level Full promises:
// a batch it accepts decodes with franz-go's own decoding (kmsg's batch,
// kgo's decompressor, kmsg's records) into exactly its count of records
// with offset deltas 0..count-1, so no acknowledged record is unreadable.
func FuzzAcceptedReadable(f *testing.F) {
	f.Add(uint8(codecNone), uint8(3), uint8(10), true, []byte{70, 1})
	f.Add(uint8(codecGzip), uint8(5), uint8(30), true, []byte{90, 0xff, 100, 3})
	f.Add(uint8(codecSnappy), uint8(2), uint8(0), true, []byte{62, 0x10})
	f.Add(uint8(codecLz4), uint8(8), uint8(200), false, []byte{})
	f.Add(uint8(codecZstd), uint8(1), uint8(1), true, []byte{61, 0x80, 57, 1})
	f.Add(uint8(codecNone), uint8(4), uint8(5), true, []byte{57, 4, 23, 4})
	c := checker(f, Full, 1<<20)
	f.Fuzz(func(t *testing.T, codec, n, size uint8, fixCRC bool, muts []byte) {
		codec %= codecZstd + 1
		count := int(n%50) + 1
		b := valid(t, codec, count, int(size))
		for i := 0; i+1 < len(muts); i += 2 {
			pos := int(muts[i]) * len(b) / 256
			if len(muts) > 40 { // long inputs reach every byte of larger batches
				pos = (int(muts[i])<<8 | int(muts[i+1])) % len(b)
			}
			b[pos] ^= muts[i+1] | 1
		}
		if fixCRC && len(b) >= kwire.BatchHeaderLen {
			binary.BigEndian.PutUint32(b[kwire.BatchOffCRC:], kwire.BatchCRC(b))
		}
		if r := c.Check(9, false, b); r.OK() {
			readable(t, b)
		}
	})
}

// readable fails t unless b decodes, with franz-go's own decoding, into
// its count of records with offset deltas 0..count-1 and nothing left.
func readable(t *testing.T, b []byte) {
	t.Helper()
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		t.Fatalf("accepted a batch kmsg cannot read: %v", err)
	}
	data := batch.Records
	if codec := kgo.CompressionCodecType(batch.Attributes & 0x07); codec != kgo.CodecNone {
		var err error
		if data, err = kgo.DefaultDecompressor().Decompress(batch.Records, codec); err != nil {
			t.Fatalf("accepted a batch kgo cannot decompress: %v", err)
		}
	}
	for i := range batch.NumRecords {
		length, n := binary.Varint(data)
		if n <= 0 || length < 0 || int64(len(data)-n) < length {
			t.Fatalf("record %d of %d: length %d past the %d bytes left", i, batch.NumRecords, length, len(data))
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:n+int(length)]); err != nil {
			t.Fatalf("record %d of %d: kmsg cannot read it: %v", i, batch.NumRecords, err)
		}
		if r.OffsetDelta != i {
			t.Fatalf("record %d has offset delta %d", i, r.OffsetDelta)
		}
		data = data[n+int(length):]
	}
	if len(data) != 0 || batch.LastOffsetDelta != batch.NumRecords-1 {
		t.Fatalf("%d bytes after %d records; last offset delta %d", len(data), batch.NumRecords, batch.LastOffsetDelta)
	}
}
