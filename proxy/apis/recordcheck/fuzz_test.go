package recordcheck

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
)

// FuzzCheck feeds arbitrary record data to Check at every level: it must
// never panic, answer the same with the CRC from a frame's sums, refuse with a reason and a code together, agree between
// levels (Framing refuses only what Full refuses, unless Full stopped at
// the CRC first), and accept only data made of exactly one whole batch.
func FuzzCheck(f *testing.F) {
	good := batch(3)
	f.Add(int16(9), false, good)
	f.Add(int16(3), true, edit(func(b []byte) { idempotent(7, 0, 0)(b); attrs(kwire.BatchAttrTransactional)(b) }, true))
	f.Add(int16(7), false, legacySet(0, 10))
	f.Add(int16(2), false, legacySet(1, 2))
	f.Add(int16(9), false, append(bytes.Clone(good), good...))
	f.Add(int16(9), false, good[:len(good)-1])
	f.Add(int16(6), false, edit(attrs(codecZstd), true))
	fullC, framingC, offC := checker(f, Full, 1<<20), checker(f, Framing, 1<<20), checker(f, Off, 1<<20)
	f.Fuzz(func(t *testing.T, version int16, txnID bool, records []byte) {
		full := checkBoth(t, fullC, version, txnID, records)
		framing := framingC.Check(version, txnID, records)
		if full.OK() != (full.Code == 0) || framing.OK() != (framing.Code == 0) {
			t.Fatalf("reason and code disagree: full %+v, framing %+v", full, framing)
		}
		if off := offC.Check(version, txnID, records); !off.OK() {
			t.Fatalf("off refused: %+v", off)
		}
		if full.OK() && !framing.OK() {
			t.Fatalf("framing refused what full accepted: %+v", framing)
		}
		if full.Reason != CRC && !recordLevel(full.Reason) && full != framing {
			t.Fatalf("full %+v and framing %+v differ on something other than the CRC and the records", full, framing)
		}
		if framing.OK() && (len(records) < kwire.BatchHeaderLen || int(int32(binary.BigEndian.Uint32(records[kwire.BatchOffLength:])))+kwire.BatchLogOverhead != len(records)) {
			t.Fatalf("accepted %d bytes that are not one whole batch", len(records))
		}
	})
}

// recordLevel reports whether r is a fault only level Full looks for, in
// the records.
func recordLevel(r Reason) bool {
	switch r {
	case RecordBody, RecordsCount, OffsetDeltas, Decompress, TooLarge:
		return true
	}
	return false
}
