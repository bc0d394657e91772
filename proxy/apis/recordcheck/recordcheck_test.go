package recordcheck

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
)

// batch is a valid batch of n records as a non-idempotent producer sends it.
func batch(n int) []byte {
	vs := make([][]byte, n)
	for i := range vs {
		vs[i] = []byte("value")
	}
	return kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, FirstTimestamp: 1700000000000, Values: vs}.Encode()
}

// edit returns a copy of a valid batch with f applied and, when crc is set,
// its CRC-32C computed again, so that only f's change is wrong.
func edit(f func(b []byte), crc bool) []byte {
	b := batch(3)
	f(b)
	if crc {
		binary.BigEndian.PutUint32(b[kwire.BatchOffCRC:], kwire.BatchCRC(b))
	}
	return b
}

func put16(off int, v int16) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint16(b[off:], uint16(v)) }
}

func put32(off int, v int32) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint32(b[off:], uint32(v)) }
}

func put64(off int, v int64) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint64(b[off:], uint64(v)) }
}

func attrs(v uint16) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint16(b[kwire.BatchOffAttributes:], v) }
}

func idempotent(pid int64, epoch int16, seq int32) func([]byte) {
	return func(b []byte) {
		put64(kwire.BatchOffProducerID, pid)(b)
		put16(kwire.BatchOffProducerEpoch, epoch)(b)
		put32(kwire.BatchOffBaseSequence, seq)(b)
	}
}

// legacySet is a magic-0 or magic-1 message set of n messages, as
// librdkafka sends one with MsgVer2 off (the CRC is not checked here).
func legacySet(magic byte, n int) []byte {
	var out []byte
	for i := range n {
		var m []byte
		m = binary.BigEndian.AppendUint32(m, 0) // crc
		m = append(m, magic, 0)
		if magic == 1 {
			m = binary.BigEndian.AppendUint64(m, 1700000000000)
		}
		m = binary.BigEndian.AppendUint32(m, 0xffffffff) // null key
		v := []byte("legacy-value")
		m = binary.BigEndian.AppendUint32(m, uint32(len(v)))
		m = append(m, v...)
		out = binary.BigEndian.AppendUint64(out, uint64(i))
		out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	return out
}

func TestCheck(t *testing.T) {
	full, framing, off := checker(t, Full, 0), checker(t, Framing, 0), checker(t, Off, 0)
	good := batch(3)
	cases := []struct {
		name    string
		version int16
		txnID   bool
		records []byte
		reason  Reason
		code    int16
	}{
		{"valid", 9, false, good, None, 0},
		{"valid single record", 3, false, batch(1), None, 0},
		{"valid idempotent", 9, false, edit(idempotent(7, 0, 0), true), None, 0},
		{"valid transactional with id", 9, true, edit(func(b []byte) { idempotent(7, 0, 0)(b); attrs(kwire.BatchAttrTransactional)(b) }, true), None, 0},
		{"valid zstd from v7", 7, false, valid(t, codecZstd, 3, 5), None, 0},
		{"valid magic 2 in v2", 2, false, good, None, 0},

		{"empty", 9, false, nil, NoBatch, kerr.InvalidRecord.Code},
		{"shorter than a length", 9, false, good[:11], NoBatch, kerr.InvalidRecord.Code},
		{"cut before magic", 9, false, good[:16], Truncated, kerr.InvalidRecord.Code},
		{"truncated batch", 9, false, good[:len(good)-1], Truncated, kerr.InvalidRecord.Code},
		{"length past the bytes", 9, false, edit(put32(kwire.BatchOffLength, int32(len(good))), false), Truncated, kerr.InvalidRecord.Code},
		{"length below v0 overhead", 9, false, edit(put32(kwire.BatchOffLength, 13), false), BatchLength, kerr.CorruptMessage.Code},
		{"negative length", 9, false, edit(put32(kwire.BatchOffLength, -1), false), BatchLength, kerr.CorruptMessage.Code},
		{"length below v2 header", 9, false, edit(put32(kwire.BatchOffLength, 28), false)[:40], BatchLength, kerr.CorruptMessage.Code},
		{"magic 3", 9, false, edit(func(b []byte) { b[kwire.BatchOffMagic] = 3 }, false), Magic, kerr.CorruptMessage.Code},
		{"magic -1", 9, false, edit(func(b []byte) { b[kwire.BatchOffMagic] = 0xff }, false), Magic, kerr.CorruptMessage.Code},
		{"magic 0 set in v7", 7, false, legacySet(0, 10), Magic, kerr.InvalidRecord.Code},
		{"magic 1 set in v3", 3, false, legacySet(1, 2), Magic, kerr.InvalidRecord.Code},
		{"magic 0 set in v2", 2, false, legacySet(0, 1), Magic, kerr.UnsupportedForMessageFormat.Code},
		{"two batches", 9, false, append(bytes.Clone(good), good...), BatchCount, kerr.InvalidRecord.Code},
		{"trailing partial batch", 9, false, append(bytes.Clone(good), good[:30]...), TrailingBytes, kerr.CorruptMessage.Code},
		{"trailing byte", 9, false, append(bytes.Clone(good), 0), TrailingBytes, kerr.CorruptMessage.Code},
		{"zstd before v7", 6, false, edit(attrs(codecZstd), true), Compression, kerr.UnsupportedCompressionType.Code},
		{"base offset 5", 9, false, edit(put64(0, 5), false), BaseOffset, kerr.InvalidRecord.Code},
		{"wrong crc", 9, false, edit(func(b []byte) { b[len(b)-1] ^= 1 }, false), CRC, kerr.CorruptMessage.Code},
		{"crc over a changed header", 9, false, edit(put32(kwire.BatchOffNumRecords, 2), false), CRC, kerr.CorruptMessage.Code},
		{"unknown codec", 9, false, edit(attrs(5), true), Compression, kerr.UnknownServerError.Code},
		{"negative last offset delta", 9, false, edit(put32(kwire.BatchOffLastOffsetDelta, -1), true), RecordCount, kerr.InvalidRecord.Code},
		{"zero records", 9, false, edit(func(b []byte) { put32(kwire.BatchOffLastOffsetDelta, -1)(b); put32(kwire.BatchOffNumRecords, 0)(b) }, true), RecordCount, kerr.InvalidRecord.Code},
		{"negative count", 9, false, edit(put32(kwire.BatchOffNumRecords, -3), true), RecordCount, kerr.InvalidRecord.Code},
		{"count not delta+1", 9, false, edit(put32(kwire.BatchOffNumRecords, 2), true), RecordCount, kerr.InvalidRecord.Code},
		{"control batch", 9, false, edit(attrs(kwire.BatchAttrControl), true), ControlBatch, kerr.InvalidRecord.Code},
		{"producer id -2", 9, false, edit(idempotent(-2, -1, -1), true), ProducerID, kerr.InvalidRecord.Code},
		{"producer epoch -2", 9, false, edit(idempotent(7, -2, 0), true), ProducerEpoch, kerr.InvalidProducerEpoch.Code},
		{"sequence -2 without producer id", 9, false, edit(idempotent(-1, -1, -2), true), BaseSequence, kerr.InvalidRecord.Code},
		{"sequence -1 with producer id", 9, false, edit(idempotent(7, 0, -1), true), BaseSequence, kerr.InvalidRecord.Code},
		{"transactional without id", 9, false, edit(func(b []byte) { idempotent(7, 0, 0)(b); attrs(kwire.BatchAttrTransactional)(b) }, true), TransactionalNoID, kerr.TransactionalIDAuthorizationFailed.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := checkBoth(t, full, c.version, c.txnID, c.records)
			if got.Reason != c.reason || got.Code != c.code {
				t.Fatalf("Check(full, v%d) = %v (%s), want %v (%s)", c.version, got.Reason, kerr.ErrorForCode(got.Code), c.reason, kerr.ErrorForCode(c.code))
			}
			if got.OK() != (c.reason == None) {
				t.Fatalf("OK() = %v for reason %v", got.OK(), got.Reason)
			}
			// Framing skips the CRC only; Off passes everything.
			f := framing.Check(c.version, c.txnID, c.records)
			switch want := (Result{Reason: c.reason, Code: c.code}); {
			case c.reason == CRC && f.Reason == CRC:
				t.Fatalf("Check(framing) checked the CRC")
			case c.reason != CRC && f != want:
				t.Fatalf("Check(framing) = %+v, want %+v", f, want)
			}
			if off := off.Check(c.version, c.txnID, c.records); !off.OK() {
				t.Fatalf("Check(off) = %+v, want it passed", off)
			}
		})
	}
}

// TestFramingWithoutCRC: a batch whose CRC is wrong but is otherwise valid
// passes Framing and fails Full.
func TestFramingWithoutCRC(t *testing.T) {
	b := edit(func(b []byte) { b[len(b)-1] ^= 1 }, false)
	if r := checker(t, Framing, 0).Check(9, false, b); !r.OK() {
		t.Fatalf("framing refused a batch whose only fault is its CRC: %+v", r)
	}
	if r := checker(t, Full, 0).Check(9, false, b); r.Reason != CRC {
		t.Fatalf("full: %+v, want CRC", r)
	}
}

func TestTransactional(t *testing.T) {
	txn := edit(func(b []byte) { idempotent(7, 0, 0)(b); attrs(kwire.BatchAttrTransactional)(b) }, true)
	cases := []struct {
		name    string
		records []byte
		want    bool
	}{
		{"transactional", txn, true},
		{"plain", batch(2), false},
		{"truncated transactional", txn[:len(txn)-1], false},
		{"legacy", legacySet(0, 3), false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		if got := Transactional(c.records); got != c.want {
			t.Errorf("%s: Transactional = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Level
		err  bool
	}{{"", Full, false}, {"full", Full, false}, {"framing", Framing, false}, {"off", Off, false}, {"crc", Full, true}, {"FULL", Full, true}} {
		got, err := ParseLevel(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
		if err == nil && c.in != "" && got.String() != c.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), c.in)
		}
	}
}

// TestReasonsLabelled: every reason has its own metric label.
func TestReasonsLabelled(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		s := r.String()
		if s == "" || seen[s] {
			t.Errorf("reason %d has label %q (empty or repeated)", r, s)
		}
		seen[s] = true
	}
}

// TestCheckAllocates nothing, at either level, valid or not, compressed
// or not (once the pools are warm).
func TestCheckAllocates(t *testing.T) {
	full, framing := checker(t, Full, 0), checker(t, Framing, 0)
	good, bad := batch(50), legacySet(0, 10)
	var compressed [][]byte
	for _, c := range codecs[1:] {
		compressed = append(compressed, valid(t, c.ID, 50, 100))
	}
	if n := testing.AllocsPerRun(100, func() {
		full.Check(9, false, good)
		framing.Check(9, false, good)
		full.Check(9, false, bad)
		Transactional(good)
		for _, b := range compressed {
			if r := full.Check(9, false, b); !r.OK() {
				t.Fatalf("refused a valid batch: %+v", r)
			}
		}
	}); n != 0 && !raceEnabled {
		t.Fatalf("%v allocations per check", n)
	}
}
