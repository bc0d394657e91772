// Package recordcheck validates the record data of one partition of a
// Produce request by the rules an Apache Kafka broker applies before it
// appends it: ProduceRequest.validateRecords (one magic-2 batch from v3 on,
// no zstd before v7), the log's batch checks (base offset 0, CRC-32C, a known
// codec), LogValidator's checks of client batches (offset range and record
// count, no control batches, a sequence with every producer id) and, at
// level Full, the records themselves as Kafka's record iterator reads them
// (decompressed first, within a bound). Each refusal carries the error code
// Kafka answers for that case, so a client behind the proxy sees what it
// would see from Kafka.
//
// It promises, at level Full, that a batch it accepts reads back as exactly
// its count of records with consecutive offsets, for any client; and no
// allocation on the hot path (decoders and buffers are pooled). Its limits:
// topic settings the proxy does not know (max.message.bytes,
// message.timestamp.type, compaction's keys) are left to the broker; where
// Kafka would rebuild a batch (inner offsets not consecutive) the proxy,
// which forwards bytes, refuses it; and a compressed batch is decompressed
// into memory, up to Config.MaxBatchBytes, while it is checked.
package recordcheck

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
)

// Level is how much of the record data is checked.
type Level uint8

const (
	// Full checks the framing and header (Framing), each batch's CRC-32C
	// and its records, decompressed when the batch is compressed (see
	// Checker.Check). It is the zero value: validation is on unless turned
	// off.
	Full Level = iota
	// Framing checks batch lengths, magic and header fields, not the CRC
	// nor the records.
	Framing
	// Off checks nothing: record data goes to the broker as the client sent it.
	Off
)

var levelNames = [...]string{Full: "full", Framing: "framing", Off: "off"}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel reads off, framing or full ("" is full, the default).
func ParseLevel(s string) (Level, error) {
	if s == "" {
		return Full, nil
	}
	for l, name := range levelNames {
		if s == name {
			return Level(l), nil
		}
	}
	return Full, fmt.Errorf("produce validation %q: want off, framing or full", s)
}

// Reason says why record data was refused; None means it was not.
type Reason uint8

// The reasons, each one case of Kafka's validation (see Result.Code).
const (
	None              Reason = iota
	NoBatch                  // fewer bytes than a batch's length field (Kafka finds no batch)
	Truncated                // a batch's length reaches past the bytes sent
	BatchLength              // a length below the smallest batch (v0 message) or v2 header
	Magic                    // magic outside 0-2, or a magic-0/1 message set
	BatchCount               // more than one batch
	TrailingBytes            // bytes after the batch that are not a batch
	BaseOffset               // a client batch's base offset is not 0
	CRC                      // the CRC-32C does not match (level Full)
	Compression              // an unknown codec, or zstd before Produce v7
	RecordCount              // record count below 1 or not last offset delta + 1
	ControlBatch             // a client wrote a control batch
	ProducerID               // producer id below -1
	ProducerEpoch            // producer epoch below -1
	BaseSequence             // base sequence below -1, or below 0 with a producer id
	TransactionalNoID        // a transactional batch in a request without a transactional id
	RecordBody               // a record's lengths run past it or its batch, or do not add up to its size (level Full)
	RecordsCount             // the records present are not the batch's count (level Full)
	OffsetDeltas             // inner offset deltas do not run 0..count-1 (level Full)
	Decompress               // a compressed batch does not decompress (level Full)
	TooLarge                 // a compressed batch decompresses past the bound (level Full)
	Busy                     // the decompression budget of checks in flight is used up (level Full)
	numReasons
)

var reasonNames = [numReasons]string{
	None: "", NoBatch: "produce_no_batch", Truncated: "produce_truncated", BatchLength: "produce_batch_length",
	Magic: "produce_magic", BatchCount: "produce_batch_count", TrailingBytes: "produce_trailing_bytes",
	BaseOffset: "produce_base_offset", CRC: "produce_crc", Compression: "produce_compression",
	RecordCount: "produce_record_count", ControlBatch: "produce_control_batch", ProducerID: "produce_producer_id",
	ProducerEpoch: "produce_producer_epoch", BaseSequence: "produce_base_sequence",
	TransactionalNoID: "produce_transactional_without_id", RecordBody: "produce_record_body",
	RecordsCount: "produce_records_count", OffsetDeltas: "produce_offset_deltas",
	Decompress: "produce_decompress", TooLarge: "produce_decompressed_too_large",
	Busy: "produce_decompress_busy",
}

// String is the reason's label in kproxy_bad_input_total.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "produce_unknown"
}

// Reasons lists every refusal reason, for metrics known in advance.
func Reasons() []Reason {
	out := make([]Reason, 0, numReasons-1)
	for r := None + 1; r < numReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Result is the outcome for one partition: Reason None and Code 0, or why
// it was refused and the Kafka error code to answer it with.
type Result struct {
	Reason Reason
	Code   int16
}

// OK reports whether the records passed.
func (r Result) OK() bool { return r.Reason == None }

func refuse(r Reason, e *kerr.Error) Result { return Result{Reason: r, Code: e.Code} }

// Sizes the checks need besides the batch layout (kwire).
const (
	upToMagic       = kwire.BatchOffMagic + 1
	minLegacyLength = 14 // Kafka's LegacyRecord.RECORD_OVERHEAD_V0: no length is smaller
)

// codecKnownMax is the highest codec Kafka knows (attribute bits 0-2).
const codecKnownMax = codecZstd

// frame checks the framing and the header, not the CRC nor the records
// (level Framing). It returns the batch's bytes, even when a header field
// fails (nil when the bytes do not frame one batch).
func frame(version int16, transactionalID bool, records []byte) ([]byte, Result) {
	size, res := first(version, records)
	if !res.OK() {
		return nil, res
	}
	b := records[:size]
	attrs := binary.BigEndian.Uint16(b[kwire.BatchOffAttributes:])
	if version < 7 && attrs&kwire.BatchAttrCodec == codecZstd {
		return nil, refuse(Compression, kerr.UnsupportedCompressionType)
	}
	if rest := records[size:]; len(rest) > 0 {
		if whole(rest) {
			return nil, refuse(BatchCount, kerr.InvalidRecord)
		}
		// Kafka would drop (or fail on) what does not frame a batch; the
		// proxy refuses it: a broker that stores it as sent cannot read on.
		return nil, refuse(TrailingBytes, kerr.CorruptMessage)
	}
	return b, header(transactionalID, b, attrs)
}

// first frames the batch at the front of records as Kafka's batch iterator
// does, and checks its magic; it returns the batch's size.
func first(version int16, records []byte) (int, Result) {
	if len(records) < kwire.BatchLogOverhead {
		return 0, refuse(NoBatch, kerr.InvalidRecord)
	}
	length := int32(binary.BigEndian.Uint32(records[kwire.BatchOffLength:]))
	if length < minLegacyLength {
		return 0, refuse(BatchLength, kerr.CorruptMessage)
	}
	if len(records) < upToMagic {
		return 0, refuse(Truncated, kerr.InvalidRecord)
	}
	magic := int8(records[kwire.BatchOffMagic])
	if magic < 0 || magic > 2 {
		return 0, refuse(Magic, kerr.CorruptMessage)
	}
	size := int64(length) + kwire.BatchLogOverhead
	if int64(len(records)) < size {
		return 0, refuse(Truncated, kerr.InvalidRecord)
	}
	if magic != 2 {
		// From v3 on Kafka refuses older formats outright. Before v3 it
		// would convert them, which the proxy cannot: the pool stores
		// magic-2 batches only, and its brokers answer this code.
		if version >= 3 {
			return 0, refuse(Magic, kerr.InvalidRecord)
		}
		return 0, refuse(Magic, kerr.UnsupportedForMessageFormat)
	}
	if size < kwire.BatchHeaderLen {
		return 0, refuse(BatchLength, kerr.CorruptMessage) // Kafka: not a valid batch, as a CRC failure
	}
	return int(size), Result{}
}

// whole reports whether b starts with a whole batch of a valid magic, which
// Kafka counts as a second batch.
func whole(b []byte) bool {
	if len(b) < upToMagic {
		return false
	}
	length := int32(binary.BigEndian.Uint32(b[kwire.BatchOffLength:]))
	magic := int8(b[kwire.BatchOffMagic])
	return length >= minLegacyLength && magic >= 0 && magic <= 2 && int64(len(b)) >= int64(length)+kwire.BatchLogOverhead
}

// header checks the fields of one magic-2 batch b (exactly its bytes), in
// Kafka's order; Kafka checks the CRC (Checker.check) after the base offset
// and before the rest.
func header(transactionalID bool, b []byte, attrs uint16) Result {
	be := binary.BigEndian
	if be.Uint64(b) != 0 {
		return refuse(BaseOffset, kerr.InvalidRecord)
	}
	if attrs&kwire.BatchAttrCodec > codecKnownMax {
		// Kafka's codec lookup throws IllegalArgumentException, which it
		// answers UNKNOWN_SERVER_ERROR.
		return refuse(Compression, kerr.UnknownServerError)
	}
	lastDelta := int32(be.Uint32(b[kwire.BatchOffLastOffsetDelta:]))
	count := int32(be.Uint32(b[kwire.BatchOffNumRecords:]))
	if int64(lastDelta)+1 <= 0 || count <= 0 || int64(count) != int64(lastDelta)+1 {
		return refuse(RecordCount, kerr.InvalidRecord)
	}
	if attrs&kwire.BatchAttrControl != 0 {
		return refuse(ControlBatch, kerr.InvalidRecord)
	}
	pid := int64(be.Uint64(b[kwire.BatchOffProducerID:]))
	epoch := int16(be.Uint16(b[kwire.BatchOffProducerEpoch:]))
	seq := int32(be.Uint32(b[kwire.BatchOffBaseSequence:]))
	switch {
	case pid < -1:
		return refuse(ProducerID, kerr.InvalidRecord)
	case epoch < -1:
		return refuse(ProducerEpoch, kerr.InvalidProducerEpoch)
	case seq < -1 || pid >= 0 && seq < 0:
		return refuse(BaseSequence, kerr.InvalidRecord)
	}
	if attrs&kwire.BatchAttrTransactional != 0 && !transactionalID {
		return refuse(TransactionalNoID, kerr.TransactionalIDAuthorizationFailed)
	}
	return Result{}
}

// Transactional reports whether records start with a whole magic-2 batch
// marked transactional, as Kafka looks at the first batch of every
// partition before anything else: such a batch in a request without a
// transactional id fails the whole request with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func Transactional(records []byte) bool {
	return len(records) >= kwire.BatchHeaderLen && records[kwire.BatchOffMagic] == 2 && whole(records) &&
		binary.BigEndian.Uint16(records[kwire.BatchOffAttributes:])&kwire.BatchAttrTransactional != 0
}
