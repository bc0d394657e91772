package partlog

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
)

// Batch is one magic-2 record batch as a producer sent it. Raw aliases the
// request bytes: the whole batch, header included.
type Batch struct {
	Raw             []byte
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
	Attributes      int16
}

// Idempotent reports whether the batch carries an idempotent producer id.
func (b *Batch) Idempotent() bool { return b.ProducerID >= 0 }

// LastSequence is the sequence number of the batch's last record (sequences
// wrap around at MaxInt32 like Kafka's).
func (b *Batch) LastSequence() int32 {
	return int32((int64(b.BaseSequence) + int64(b.LastOffsetDelta)) % (1 << 31))
}

// BatchError is a produce-side validation failure with the Kafka error code
// the partition must answer.
type BatchError struct {
	Code int16
	Msg  string
}

func (e *BatchError) Error() string { return e.Msg }

func batchErr(code *kerr.Error, format string, args ...any) *BatchError {
	return &BatchError{Code: code.Code, Msg: fmt.Sprintf(format, args...)}
}

// ParseProduce splits the records of one produce partition into batches and
// validates each: magic 2 only, complete, CRC-32C correct, no control or
// transactional batches. Nothing is copied.
func ParseProduce(records []byte) ([]Batch, *BatchError) {
	if len(records) == 0 {
		return nil, batchErr(kerr.InvalidRecord, "produce without record batches")
	}
	var out []Batch
	for rest := records; len(rest) > 0; {
		if len(rest) < kwire.BatchOffMagic+1 {
			return nil, batchErr(kerr.CorruptMessage, "truncated batch header: %d bytes", len(rest))
		}
		if magic := int8(rest[kwire.BatchOffMagic]); magic != 2 {
			return nil, batchErr(kerr.UnsupportedForMessageFormat, "record batch magic %d, only magic 2 is supported", magic)
		}
		size, err := batchSize(rest)
		if err != nil {
			return nil, err
		}
		raw := rest[:size]
		rest = rest[size:]
		want := binary.BigEndian.Uint32(raw[kwire.BatchOffCRC:])
		if got := kwire.BatchCRC(raw); got != want {
			return nil, batchErr(kerr.CorruptMessage, "record batch CRC %08x, computed %08x", want, got)
		}
		b := headerOf(raw)
		switch {
		case b.Attributes&kwire.BatchAttrControl != 0:
			return nil, batchErr(kerr.InvalidRecord, "producers may not write control batches")
		case b.Attributes&kwire.BatchAttrTransactional != 0:
			return nil, batchErr(kerr.UnsupportedVersion, "transactional produce is not supported by this broker")
		case b.LastOffsetDelta < 0 || int64(b.NumRecords) != int64(b.LastOffsetDelta)+1:
			return nil, batchErr(kerr.InvalidRecord, "batch of %d records has last offset delta %d", b.NumRecords, b.LastOffsetDelta)
		}
		out = append(out, b)
	}
	return out, nil
}

// ParseTrusting is ParseProduce without its checks, for tests of what a
// broker that does not validate stores: each piece is framed by its length
// field when that fits, else the rest is one piece, and its header is read
// as magic 2 whatever its magic. Only a piece too short to hold a header is
// refused (CORRUPT_MESSAGE): storing it would break the stub itself, not
// just the partition.
func ParseTrusting(records []byte) ([]Batch, *BatchError) {
	var out []Batch
	for rest := records; len(rest) > 0; {
		n := len(rest)
		if len(rest) >= kwire.BatchHeaderLen {
			if s := int64(int32(binary.BigEndian.Uint32(rest[kwire.BatchOffLength:]))) + kwire.BatchLogOverhead; s >= kwire.BatchHeaderLen && s <= int64(len(rest)) {
				n = int(s)
			}
		}
		if n < kwire.BatchHeaderLen {
			return nil, batchErr(kerr.CorruptMessage, "a piece of %d bytes cannot hold a batch header", n)
		}
		out = append(out, headerOf(rest[:n]))
		rest = rest[n:]
	}
	if len(out) == 0 {
		return nil, batchErr(kerr.InvalidRecord, "produce without record batches")
	}
	return out, nil
}

// batchSize is the byte length of the batch at the front of b.
func batchSize(b []byte) (int, *BatchError) {
	if len(b) < kwire.BatchHeaderLen {
		return 0, batchErr(kerr.CorruptMessage, "truncated batch header: %d bytes", len(b))
	}
	n := int64(int32(binary.BigEndian.Uint32(b[kwire.BatchOffLength:]))) + kwire.BatchLogOverhead
	if n < kwire.BatchHeaderLen || n > int64(len(b)) {
		return 0, batchErr(kerr.CorruptMessage, "batch length %d does not fit in %d bytes", n, len(b))
	}
	return int(n), nil
}

// headerOf reads the header fields of a batch already checked to be long
// enough.
func headerOf(raw []byte) Batch {
	be := binary.BigEndian
	return Batch{
		Raw:             raw,
		Attributes:      int16(be.Uint16(raw[kwire.BatchOffAttributes:])),
		LastOffsetDelta: int32(be.Uint32(raw[kwire.BatchOffLastOffsetDelta:])),
		FirstTimestamp:  int64(be.Uint64(raw[kwire.BatchOffFirstTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(raw[kwire.BatchOffMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(raw[kwire.BatchOffProducerID:])),
		ProducerEpoch:   int16(be.Uint16(raw[kwire.BatchOffProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(raw[kwire.BatchOffBaseSequence:])),
		NumRecords:      int32(be.Uint32(raw[kwire.BatchOffNumRecords:])),
	}
}

// setBaseOffset rewrites the base offset of the batch at the front of b. The
// CRC covers only the bytes from the attributes on, so it stays valid.
func setBaseOffset(b []byte, base int64) {
	binary.BigEndian.PutUint64(b[kwire.BatchOffBaseOffset:], uint64(base))
}

// StoredBatch is the header of a batch read back from a segment.
type StoredBatch struct {
	Raw          []byte
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64
	Attributes   int16
}

// ScanBatches calls fn for every batch of a segment object, in order, until
// fn returns false. A malformed tail ends the scan with an error.
func ScanBatches(data []byte, fn func(StoredBatch) bool) error {
	for pos := 0; pos < len(data); {
		size, err := batchSize(data[pos:])
		if err != nil {
			return fmt.Errorf("segment at byte %d: %w", pos, err)
		}
		raw := data[pos : pos+size]
		h := headerOf(raw)
		base := int64(binary.BigEndian.Uint64(raw[kwire.BatchOffBaseOffset:]))
		sb := StoredBatch{Raw: raw, BaseOffset: base, LastOffset: base + int64(h.LastOffsetDelta),
			MaxTimestamp: h.MaxTimestamp, Attributes: h.Attributes}
		if !fn(sb) {
			return nil
		}
		pos += size
	}
	return nil
}
