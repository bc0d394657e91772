package recordcheck

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// walkInPieces is walker's verdict on data arriving in random pieces.
func walkInPieces(data []byte, count int32, seed uint64) Reason {
	rng := rand.New(rand.NewPCG(seed, 3))
	w := newWalker(count, len(data))
	for have := 0; !w.done; {
		if have == len(data) {
			return 0xff // all the data, and still not done: a bug
		}
		have = min(len(data), have+1+rng.IntN(max(1, len(data)/3)))
		w.advance(data[:have])
	}
	return w.res
}

// TestWalkerInPieces: walking records as they arrive, in any pieces, gives
// walk's verdict on the whole data: for good records, for every hostile
// shape and for every one-byte change of a good batch's records.
func TestWalkerInPieces(t *testing.T) {
	type tc struct {
		name  string
		data  []byte
		count int32
	}
	good := records(9, 200)
	cases := []tc{
		{"good", good, 9},
		{"good, one record", records(1, 3000), 1},
		{"count one more", good, 10},
		{"count one less", good, 8},
		{"cut", good[:len(good)-7], 9},
	}
	for _, s := range probe.Shapes() {
		if b := s.Records; len(b) > kwire.BatchHeaderLen && b[kwire.BatchOffAttributes+1]&kwire.BatchAttrCodec == 0 {
			cases = append(cases, tc{s.Name, b[kwire.BatchHeaderLen:], int32(binary.BigEndian.Uint32(b[kwire.BatchOffNumRecords:]))})
		}
	}
	for i := 0; i < len(good); i += 7 {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(good)
			b[i] ^= x
			cases = append(cases, tc{"changed byte", b, 9})
		}
	}
	changed := 0
	for _, c := range cases {
		want := walk(c.data, c.count)
		if want != None {
			changed++
		}
		for seed := range uint64(20) {
			if got := walkInPieces(c.data, c.count, seed); got != want {
				t.Fatalf("%s (%d bytes, count %d), pieces from seed %d: %v, walk says %v", c.name, len(c.data), c.count, seed, got, want)
			}
		}
	}
	if changed < 20 { // most changed bytes lie in values, which the walk skips
		t.Fatalf("only %d of %d cases are refused: the cases do not test refusals", changed, len(cases))
	}
}

// TestArrivalWalksAsTheFrameArrives: for every Produce version the scan
// follows (3-13), with tagged fields and without, the scan of a frame
// observed in pieces walks every uncompressed batch, and the checks that
// use its verdicts answer as checks that read the batches again, for good
// batches, lying ones, compressed ones, short and null records.
func TestArrivalWalksAsTheFrameArrives(t *testing.T) {
	full := checker(t, Full, 0)
	lying := probe.Framed(probe.None, 5, 4, probe.Records(1, "c5"))
	deltas := probe.Framed(probe.None, 2, 1, append(record(0, []byte("a")), record(1000, []byte("b"))...))
	big := valid(t, codecNone, 300, 1024) // pieces land inside records
	parts := [][][]byte{
		{valid(t, codecNone, 3, 100), lying, nil, big},
		{}, // a topic without partitions
		{valid(t, codecGzip, 20, 100), []byte("short"), {}, deltas},
	}
	walkable := map[int]bool{0: true, 1: true, 3: true, 203: true}
	for version := int16(3); version <= 13; version++ {
		for _, tagged := range []bool{false, true} {
			frame, in := produceFrame(t, version, parts, tagged)
			a := observed(frame, uint64(version))
			for ti, ps := range in {
				for pi, records := range ps {
					if walkable[100*ti+pi] && !reached(a, records) {
						t.Fatalf("v%d tagged %v: the scan did not walk topic %d partition %d", version, tagged, ti, pi)
					}
					want := full.Check(version, false, records)
					if got := full.CheckSummed(version, false, records, a); got != want {
						t.Fatalf("v%d tagged %v topic %d partition %d: with the scan %+v, read again %+v", version, tagged, ti, pi, got, want)
					}
				}
			}
			if r := full.CheckSummed(version, false, lying, a); r.Reason != RecordsCount {
				t.Fatalf("v%d: the lying batch outside the frame = %+v, want it read again and refused", version, r)
			}
		}
	}
}

// reached reports whether a holds a verdict for records' batch.
func reached(a *Arrival, records []byte) bool {
	if len(records) < kwire.BatchHeaderLen {
		return false
	}
	_, ok := a.walked(records[kwire.BatchHeaderLen:], int32(binary.BigEndian.Uint32(records[kwire.BatchOffNumRecords:])))
	a.next = 0
	return ok
}

// TestArrivalOtherFrames: the scan walks nothing in frames it does not
// follow (another api, Produce before v3), and a verdict is never used for
// other bytes than its own: the same batch outside the frame, or cut
// shorter, is read again.
func TestArrivalOtherFrames(t *testing.T) {
	good := valid(t, codecNone, 3, 100)
	frame, in := produceFrame(t, 9, [][][]byte{{good}}, false)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"metadata", append([]byte{0, 3}, frame[2:]...)},
		{"produce v2", append([]byte{0, 0, 0, 2}, frame[4:]...)},
		{"produce v14", append([]byte{0, 0, 0, 14}, frame[4:]...)},
	} {
		if a := observed(c.frame, 1); len(a.scan.walks) != 0 {
			t.Errorf("%s: the scan walked %d batches", c.name, len(a.scan.walks))
		}
	}
	a := observed(frame, 1)
	rec := in[0][0]
	if !reached(a, rec) {
		t.Fatal("the scan did not walk the batch")
	}
	data := rec[kwire.BatchHeaderLen:]
	for name, d := range map[string][]byte{"a copy": bytes.Clone(data), "cut": data[:len(data)-1]} {
		if _, ok := a.walked(d, 3); ok {
			t.Errorf("%s of the batch's records took the scan's verdict", name)
		}
	}
	if _, ok := a.walked(data, 4); ok {
		t.Error("another count took the scan's verdict")
	}
}

// FuzzScan: the scan of arbitrary frame bytes, in pieces, never panics, and
// every verdict it keeps is walk's on exactly its bytes and count. (A walk
// may end before its bytes have all arrived, a fault or the count reached
// early; a verdict past the frame's end is never looked up, since only
// bytes within the frame are.)
func FuzzScan(f *testing.F) {
	good, lying := valid(f, codecNone, 3, 100), probe.Framed(probe.None, 5, 4, probe.Records(1, "c5"))
	for _, v := range []int16{3, 8, 9, 13} {
		frame, _ := produceFrame(f, v, [][][]byte{{good, lying}, {nil, good}}, true)
		f.Add(frame, uint64(v))
	}
	f.Fuzz(func(t *testing.T, frame []byte, seed uint64) {
		a := observed(frame, seed)
		for _, w := range a.scan.walks {
			if w.off < 0 || w.n < 0 {
				t.Fatalf("a verdict for bytes %d..%d", w.off, w.off+w.n)
			}
			if w.off+w.n > len(frame) {
				if _, ok := a.walked(frame[min(w.off, len(frame)):], w.count); ok {
					t.Fatalf("a verdict for bytes %d..%d of a %d-byte frame was used", w.off, w.off+w.n, len(frame))
				}
				continue
			}
			if want := walk(frame[w.off:w.off+w.n], w.count); w.res != want {
				t.Fatalf("the scan's verdict %v for bytes %d..%d, count %d; walk says %v", w.res, w.off, w.off+w.n, w.count, want)
			}
		}
	})
}
