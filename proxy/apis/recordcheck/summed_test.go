package recordcheck

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/crc32c"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// inFrame places records in a Produce frame, at a version from seed
// (3-13) and between partitions of random bytes of random lengths, observes
// the frame in random pieces, as a connection reads it, and returns the
// records as they lie in the frame, with the Arrival.
func inFrame(t testing.TB, records []byte, seed uint64) ([]byte, *Arrival) {
	return inFrameFlipped(t, records, seed, -1)
}

// inFrameFlipped is inFrame with the frame observed while the byte at flip
// of records (if not -1) was different: sums (and walks) that do not match
// the bytes.
func inFrameFlipped(t testing.TB, records []byte, seed uint64, flip int) ([]byte, *Arrival) {
	rng := rand.New(rand.NewPCG(seed, 1))
	pre, post := make([]byte, rng.IntN(2*crc32c.Block)), make([]byte, rng.IntN(2*crc32c.Block))
	for _, b := range [][]byte{pre, post} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	version := int16(3 + rng.IntN(11))
	frame, in := produceFrame(t, version, [][][]byte{{pre, records, post}}, seed%2 == 0)
	rec := in[0][1]
	if flip >= 0 {
		rec[flip] ^= 1
	}
	a := observed(frame, seed)
	if flip >= 0 {
		rec[flip] ^= 1
	}
	return rec, a
}

// checkBoth is c.Check of records, after checking that CheckSummed of
// the same records lying in a summed frame answers the same.
func checkBoth(t testing.TB, c *Checker, version int16, txnID bool, records []byte) Result {
	t.Helper()
	want := c.Check(version, txnID, records)
	in, arrived := inFrame(t, records, uint64(len(records)))
	if got := c.CheckSummed(version, txnID, in, arrived); got != want {
		t.Fatalf("CheckSummed = %+v, Check = %+v", got, want)
	}
	return want
}

// TestCheckSummedTakesTheFrameCRC: the CRC CheckSummed compares is the
// frame's, from its sums: sums taken while a byte in the middle of the
// batch was different refuse the batch, whose own CRC is right; sums of
// the batch accept it. Records outside the frame the sums are bound to are
// read again.
func TestCheckSummedTakesTheFrameCRC(t *testing.T) {
	full := checker(t, Full, 0)
	for _, cd := range codecs {
		t.Run(cd.Name, func(t *testing.T) {
			var raw []byte // random values: the batch stays large compressed
			for i := range int32(80) {
				raw = append(raw, record(i, probe.Junk(300, uint64(i)))...)
			}
			good := framed(cd.ID, 80, 79, compress(t, cd.ID, raw))
			if len(good) < 4*crc32c.Block {
				t.Fatalf("a batch of %d bytes has no whole Block of the sums in its middle", len(good))
			}
			if r := full.Check(9, false, good); !r.OK() {
				t.Fatalf("the batch, read: %+v", r)
			}
			if in, sums := inFrame(t, good, 7); !full.CheckSummed(9, false, in, sums).OK() {
				t.Fatal("the batch with its frame's sums refused")
			}
			in, sums := inFrameFlipped(t, good, 7, len(good)/2)
			if r := full.CheckSummed(9, false, in, sums); r.Reason != CRC || r.Code != kerr.CorruptMessage.Code {
				t.Fatalf("the batch against sums of other bytes = %+v, want CRC (CORRUPT_MESSAGE): the sums were not used", r)
			}
			if r := full.CheckSummed(9, false, bytes.Clone(in), sums); !r.OK() {
				t.Fatalf("the batch outside the summed frame = %+v, want it read again and passed", r)
			}
		})
	}
}
