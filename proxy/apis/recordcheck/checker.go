// This file is the Checker: the level, the decompression bound and the
// decoders it reuses, and Batch, the validated records it hands on to a
// caller that works on them next (record encryption).

package recordcheck

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/crc32c"
	"github.com/kproxy/kproxy/internal/kwire"
)

// DefaultMaxBatchBytes is Config.MaxBatchBytes's default: the proxy's
// default --max-frame-bytes, the largest request (so batch) it reads.
const DefaultMaxBatchBytes = 100 << 20

// Config configures a Checker.
type Config struct {
	Level Level
	// MaxBatchBytes bounds what a compressed batch may decompress to: the
	// largest batch the proxy accepts at all (its --max-frame-bytes).
	// A batch that decompresses to more is refused (TooLarge) once the
	// bound is reached; no more is ever allocated. Zero:
	// DefaultMaxBatchBytes.
	MaxBatchBytes int
	// DecompressBudget bounds the decompressed bytes that all checks in
	// flight hold together (their output buffers' capacity); a batch that
	// would take more than is left is refused (Busy, REQUEST_TIMED_OUT,
	// which clients retry). Zero: twice MaxBatchBytes, so that one batch of
	// the largest size is always checked beside others.
	DecompressBudget int64
}

// Checker validates Produce record data; it is safe for concurrent use.
// Close releases its decoders.
type Checker struct {
	level Level
	dec   *decoders
}

// New returns a Checker for cfg.
func New(cfg Config) (*Checker, error) {
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.DecompressBudget <= 0 {
		cfg.DecompressBudget = 2 * int64(cfg.MaxBatchBytes)
	}
	d, err := newDecoders(cfg.MaxBatchBytes, cfg.DecompressBudget)
	if err != nil {
		return nil, fmt.Errorf("recordcheck: decoders: %w", err)
	}
	return &Checker{level: cfg.Level, dec: d}, nil
}

// Level is the level c checks at.
func (c *Checker) Level() Level { return c.level }

// Close releases c's decoders; c must not be used after.
func (c *Checker) Close() { c.dec.close() }

// Check validates the records of one partition of a Produce at version
// (the client's), as Kafka does, in Kafka's order; transactionalID says
// whether the request carries a transactional id. Level Off passes
// everything; Framing checks the batch and its header; Full checks the CRC
// too and then the records: exactly the batch's count of them, each whole
// (Records.Next), with offset deltas 0..count-1. A compressed batch is
// decompressed first, within Config.MaxBatchBytes.
func (c *Checker) Check(version int16, transactionalID bool, records []byte) Result {
	var b Batch
	r := c.CheckBatch(version, transactionalID, records, &b)
	b.Release()
	return r
}

// Batch is one batch that passed Check at level Full, for a caller that
// works on its records next without decoding them again: Records walks
// them (no fault is left to find). Release gives back the decompressed
// bytes; Records and Data must not be used after.
type Batch struct {
	// Header is the batch's header (kwire.BatchHeaderLen bytes of the
	// client's data) and Codec its compression codec (0: none).
	Header []byte
	Codec  uint8
	// Data is the batch's records: the client's bytes after the header
	// when uncompressed, else the decompressed bytes, owned by the Batch.
	Data []byte
	// Count is the number of records, which Data holds exactly.
	Count int32

	buf   *[]byte
	dec   *decoders
	grant grant // the decompression budget Data's buffer holds
}

// Records walks b's records in order; offset deltas run 0..Count-1.
func (b *Batch) Records() Records { return NewRecords(b.Data) }

// Release gives back what b holds; it may be called on an empty Batch.
func (b *Batch) Release() {
	if b.buf != nil {
		b.dec.putBuf(b.buf)
	}
	b.grant.release()
	*b = Batch{}
}

// CheckBatch is Check, and when the records pass at level Full it fills
// into with the validated batch (which the caller then Releases, passed or
// not). At a lower level into is left empty.
func (c *Checker) CheckBatch(version int16, transactionalID bool, records []byte, into *Batch) Result {
	return c.check(version, transactionalID, records, nil, into)
}

// CheckSummedBatch is CheckBatch for records that lie in a frame whose
// bytes were observed as they arrived (arrived, which may be nil): the
// batch's CRC comes from the frame's sums and its records' verdict from the
// frame's scan when it reached them, so the bytes are not read again for
// either. The produce path, which hands the decompressed records on to
// encryption.
func (c *Checker) CheckSummedBatch(version int16, transactionalID bool, records []byte, arrived *Arrival, into *Batch) Result {
	return c.check(version, transactionalID, records, arrived, into)
}

// CheckSummed is Check for records that lie in a frame observed as it
// arrived (CheckSummedBatch).
func (c *Checker) CheckSummed(version int16, transactionalID bool, records []byte, arrived *Arrival) Result {
	var b Batch
	r := c.check(version, transactionalID, records, arrived, &b)
	b.Release()
	return r
}

// check is CheckBatch with what arrived has of the frame, else the batch's
// bytes read again.
func (c *Checker) check(version int16, transactionalID bool, records []byte, arrived *Arrival, into *Batch) Result {
	if c.level == Off {
		return Result{}
	}
	b, res := frame(version, transactionalID, records)
	if c.level != Full || b == nil || res.Reason == BaseOffset {
		// Not one batch: no CRC to check. Kafka checks the base offset
		// before the CRC.
		return res
	}
	// Kafka checks the CRC before the other header fields, so a wrong CRC
	// is the answer whatever else is wrong.
	under := b[kwire.BatchOffAttributes:]
	sum, ok := arrived.Checksum(under)
	if !ok {
		sum = crc32c.Checksum(under)
	}
	if sum != binary.BigEndian.Uint32(b[kwire.BatchOffCRC:]) {
		return refuse(CRC, kerr.CorruptMessage)
	}
	if !res.OK() {
		return res
	}
	return c.records(b, arrived, into)
}

// records checks the records of batch b, whose header and CRC passed,
// into into; an uncompressed batch's verdict comes from arrived if its scan
// walked them.
func (c *Checker) records(b []byte, arrived *Arrival, into *Batch) Result {
	be := binary.BigEndian
	codec := uint8(be.Uint16(b[kwire.BatchOffAttributes:]) & kwire.BatchAttrCodec)
	count := int32(be.Uint32(b[kwire.BatchOffNumRecords:]))
	*into = Batch{Header: b[:kwire.BatchHeaderLen], Codec: codec, Data: b[kwire.BatchHeaderLen:], Count: count, dec: c.dec}
	if codec != codecNone {
		if r := c.decompress(into); r != None {
			return refuseFor(r)
		}
	}
	r, ok := None, false
	if codec == codecNone {
		r, ok = arrived.walked(into.Data, count)
	}
	if !ok {
		r = walk(into.Data, count)
	}
	if r != None {
		return refuseFor(r)
	}
	return Result{}
}

// decompress replaces b.Data, compressed, with its records decompressed
// into a pooled buffer that b then holds.
func (c *Checker) decompress(b *Batch) Reason {
	if int64(b.Count) > int64(c.dec.max/minRecordBytes) {
		return RecordsCount // more records than the bound could hold: no need to decompress
	}
	b.buf, b.grant.mem = c.dec.getBuf(), c.dec.mem
	out, err := c.dec.decompress(uint16(b.Codec), (*b.buf)[:0], b.Data, &b.grant)
	if cap(out) > 0 {
		*b.buf = out[:0] // keep what grew, for the pool
	}
	b.Data = out
	switch {
	case err == nil:
		return None
	case errors.Is(err, errTooLarge):
		return TooLarge
	case errors.Is(err, errBusy):
		return Busy
	case errors.Is(err, errTruncated):
		return RecordsCount // Kafka: premature EOF
	}
	return Decompress
}

// refuseFor is the record-level refusal of r with Kafka's code. Kafka's
// record iterator throws InvalidRecordException (INVALID_RECORD) for every
// record fault; a stream that fails to decompress is a KafkaException,
// which it answers UNKNOWN_SERVER_ERROR. Kafka has no decompression bound
// of its own: the proxy answers MESSAGE_TOO_LARGE, as for a batch over
// the broker's max.message.bytes, and REQUEST_TIMED_OUT (retried by
// clients) when the budget of all checks in flight is used up.
func refuseFor(r Reason) Result {
	switch r {
	case Decompress:
		return refuse(r, kerr.UnknownServerError)
	case TooLarge:
		return refuse(r, kerr.MessageTooLarge)
	case Busy:
		return refuse(r, kerr.RequestTimedOut)
	}
	return refuse(r, kerr.InvalidRecord)
}
