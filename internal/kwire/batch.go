package kwire

import "github.com/kproxy/kproxy/internal/crc32c"

// Offsets of the fields of a record batch (magic 2), from the batch's
// first byte. Every magic shares the first three: base offset, length and,
// at BatchOffMagic, the magic byte.
const (
	BatchOffBaseOffset      = 0
	BatchOffLength          = 8
	BatchOffLeaderEpoch     = 12
	BatchOffMagic           = 16
	BatchOffCRC             = 17
	BatchOffAttributes      = 21
	BatchOffLastOffsetDelta = 23
	BatchOffFirstTimestamp  = 27
	BatchOffMaxTimestamp    = 35
	BatchOffProducerID      = 43
	BatchOffProducerEpoch   = 51
	BatchOffBaseSequence    = 53
	BatchOffNumRecords      = 57
	// BatchHeaderLen is a magic-2 batch header, records not included.
	BatchHeaderLen = 61
	// BatchLogOverhead is the base offset and length in front of every
	// batch; the length counts the bytes after them.
	BatchLogOverhead = 12
)

// Attribute bits of a magic-2 batch.
const (
	BatchAttrCodec         = 0x07
	BatchAttrTransactional = 0x10
	BatchAttrControl       = 0x20
)

// BatchCRC is the CRC-32C a magic-2 batch b carries at BatchOffCRC: over
// everything from its attributes on.
func BatchCRC(b []byte) uint32 { return crc32c.Checksum(b[BatchOffAttributes:]) }
