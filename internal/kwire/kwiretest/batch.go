// Package kwiretest builds Kafka wire data for tests: record batches as a
// producer encodes them. It is imported by tests only.
package kwiretest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch describes a magic-2, uncompressed record batch.
type Batch struct {
	// ProducerID is -1 for a batch that is not idempotent (ProducerEpoch
	// and FirstSequence are then sent as -1 too).
	ProducerID    int64
	ProducerEpoch int16
	FirstSequence int32
	// FirstTimestamp is the first record's time (Unix ms); record i is
	// TimestampDelta i after it when SpreadTimestamps is set, else at it.
	FirstTimestamp   int64
	SpreadTimestamps bool
	// LeaderEpoch is the PartitionLeaderEpoch field (producers send -1).
	LeaderEpoch int32
	Values      [][]byte
}

// Values is Batch.Values from strings.
func Values(vs ...string) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = []byte(v)
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the batch with kmsg's types, its Length and CRC-32C filled
// in as the format defines them.
func (s Batch) Encode() []byte {
	var recs []byte
	for i, v := range s.Values {
		r := kmsg.NewRecord()
		r.OffsetDelta, r.Value = int32(i), v
		if s.SpreadTimestamps {
			r.TimestampDelta64 = int64(i)
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after the 1-byte varint 0
		recs = r.AppendTo(recs)
	}
	maxTS := s.FirstTimestamp
	if s.SpreadTimestamps && len(s.Values) > 0 {
		maxTS += int64(len(s.Values)) - 1
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: s.LeaderEpoch, Magic: 2,
		LastOffsetDelta: int32(len(s.Values) - 1), FirstTimestamp: s.FirstTimestamp, MaxTimestamp: maxTS,
		ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, FirstSequence: s.FirstSequence,
		NumRecords: int32(len(s.Values)), Records: recs,
	}
	if s.ProducerID < 0 {
		b.ProducerEpoch, b.FirstSequence = -1, -1
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                   // after FirstOffset and Length
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli)) // from Attributes on
	return raw
}
