package recordcheck

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/crc32c"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// inFrame places records at a random offset of a frame of other bytes,
// takes the frame's sums in random chunks, as a connection reads it, and
// returns the records as they lie in the frame, with the sums.
func inFrame(records []byte, seed uint64) ([]byte, *crc32c.Sums) {
	return inFrameFlipped(records, seed, -1)
}

// inFrameFlipped is inFrame with the sums taken while the byte at flip of
// records (if not -1) was different: sums that do not match the bytes.
func inFrameFlipped(records []byte, seed uint64, flip int) ([]byte, *crc32c.Sums) {
	rng := rand.New(rand.NewPCG(seed, 1))
	pre, post := rng.IntN(2*crc32c.Block), rng.IntN(2*crc32c.Block)
	frame := make([]byte, pre+len(records)+post)
	for i := range frame {
		frame[i] = byte(rng.Uint32())
	}
	copy(frame[pre:], records)
	if flip >= 0 {
		frame[pre+flip] ^= 1
	}
	s := new(crc32c.Sums)
	s.Reset()
	for rest := frame; len(rest) > 0; {
		k := min(len(rest), 1+rng.IntN(3*crc32c.Block))
		s.Write(rest[:k])
		rest = rest[k:]
	}
	if flip >= 0 {
		frame[pre+flip] ^= 1
	}
	s.Bind(frame)
	return frame[pre : pre+len(records)], s
}

// checkBoth is c.Check of records, after checking that CheckSummed of
// the same records lying in a summed frame answers the same.
func checkBoth(t testing.TB, c *Checker, version int16, txnID bool, records []byte) Result {
	t.Helper()
	want := c.Check(version, txnID, records)
	in, sums := inFrame(records, uint64(len(records)))
	if got := c.CheckSummed(version, txnID, in, sums); got != want {
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
			if in, sums := inFrame(good, 7); !full.CheckSummed(9, false, in, sums).OK() {
				t.Fatal("the batch with its frame's sums refused")
			}
			in, sums := inFrameFlipped(good, 7, len(good)/2)
			if r := full.CheckSummed(9, false, in, sums); r.Reason != CRC || r.Code != kerr.CorruptMessage.Code {
				t.Fatalf("the batch against sums of other bytes = %+v, want CRC (CORRUPT_MESSAGE): the sums were not used", r)
			}
			if r := full.CheckSummed(9, false, bytes.Clone(in), sums); !r.OK() {
				t.Fatalf("the batch outside the summed frame = %+v, want it read again and passed", r)
			}
		})
	}
}
