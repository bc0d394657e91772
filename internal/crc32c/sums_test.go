package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

var ref = crc32.MakeTable(crc32.Castagnoli)

// sumsOf writes frame into s in chunks cut at the offsets cuts draws, and
// binds it.
func sumsOf(t testing.TB, s *Sums, frame []byte, cut func(left int) int) {
	t.Helper()
	s.Reset()
	for rest := frame; len(rest) > 0; {
		k := min(len(rest), max(cut(len(rest)), 0))
		s.Write(rest[:k])
		rest = rest[k:]
	}
	if !s.Bind(frame) {
		t.Fatalf("Bind of the %d bytes written refused", len(frame))
	}
}

// TestChecksumRanges is the property: for random frames, chunkings and
// ranges, Checksum is crc32's CRC-32C of the range.
func TestChecksumRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s Sums // reused, as a connection reuses it
	sizes := []int{1, 2, Block - 1, Block, Block + 1, 3*Block + 7, 64 << 10, 1<<20 + 13}
	for _, size := range sizes {
		frame := make([]byte, size)
		for i := range frame {
			frame[i] = byte(rng.Uint32())
		}
		chunkings := map[string]func(int) int{
			"whole":  func(left int) int { return left },
			"bytes":  func(int) int { return 1 + rng.IntN(3) },
			"random": func(int) int { return 1 + rng.IntN(3*Block) },
			"blocks": func(int) int { return Block },
			"64KiB":  func(int) int { return 64 << 10 },
		}
		for name, cut := range chunkings {
			if name == "bytes" && size > 64<<10 {
				continue // a million one-byte writes add nothing the small frames do not show
			}
			sumsOf(t, &s, frame, cut)
			for range 200 {
				a, b := rng.IntN(size+1), rng.IntN(size+1)
				if a > b {
					a, b = b, a
				}
				if a == b {
					continue
				}
				checkRange(t, &s, frame, a, b)
			}
			checkRange(t, &s, frame, 0, size)
		}
	}
}

func checkRange(t *testing.T, s *Sums, frame []byte, a, b int) {
	t.Helper()
	got, ok := s.Checksum(frame[a:b])
	if want := crc32.Checksum(frame[a:b], ref); !ok || got != want {
		t.Fatalf("frame of %d bytes, range [%d,%d): Checksum %#08x (ok %v), want %#08x", len(frame), a, b, got, ok, want)
	}
}

// TestChecksumOutsideFrame: a range that is not part of the bound frame,
// a frame not bound, or a nil Sums answer nothing, never a wrong sum.
func TestChecksumOutsideFrame(t *testing.T) {
	backing := make([]byte, 6*Block) // the frame and, past it, other bytes
	frame := backing[Block : 5*Block]
	var s Sums
	if _, ok := s.Checksum(frame); ok {
		t.Fatal("an unbound Sums answered")
	}
	var nilSums *Sums
	if _, ok := nilSums.Checksum(frame); ok {
		t.Fatal("a nil Sums answered")
	}
	s.Write(frame[:Block])
	if s.Bind(frame) {
		t.Fatal("Bind accepted a frame longer than what was written")
	}
	s.Write(frame[Block:])
	if !s.Bind(frame) {
		t.Fatal("Bind refused the frame written")
	}
	for name, b := range map[string][]byte{
		"another slice":         make([]byte, 2*Block),
		"larger than the frame": make([]byte, 8*Block),
		"empty":                 frame[:0],
		"runs past the end":     backing[2*Block : 5*Block+1],
		"starts before":         backing[Block-1 : 2*Block],
		"past the end":          backing[5*Block:],
	} {
		if _, ok := s.Checksum(b); ok {
			t.Errorf("%s: Checksum answered", name)
		}
	}
}

// TestShift is the combine identity on random lengths, the zero shift and
// the longest lengths included.
func TestShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 255, 256, 4097, 1 << 20} {
		a, b := make([]byte, 1+rng.IntN(100)), make([]byte, n)
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		ab := append(append([]byte(nil), a...), b...)
		got := Shift(Checksum(a), len(b)) ^ Checksum(b)
		if want := crc32.Checksum(ab, ref); got != want {
			t.Errorf("len(B) %d: Shift combine %#08x, want %#08x", n, got, want)
		}
	}
}

// FuzzChecksum: any frame, any chunking, any range.
func FuzzChecksum(f *testing.F) {
	f.Add(make([]byte, 3*Block+5), uint64(1), uint16(3), uint16(Block+9))
	f.Add([]byte("x"), uint64(2), uint16(0), uint16(1))
	f.Fuzz(func(t *testing.T, frame []byte, seed uint64, a, b uint16) {
		if len(frame) == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var s Sums
		sumsOf(t, &s, frame, func(int) int { return 1 + rng.IntN(2*Block) })
		lo, hi := int(a)%len(frame), int(b)%(len(frame)+1)
		if lo >= hi {
			lo, hi = 0, len(frame)
		}
		checkRange(t, &s, frame, lo, hi)
	})
}

// BenchmarkFrameSums is the prefix sums' cost as a frame arrives in 64 KiB
// reads, against crc32 over the same bytes in one call.
func BenchmarkFrameSums(b *testing.B) {
	frame := make([]byte, 1<<20)
	var s Sums
	b.Run("sums", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			s.Reset()
			for off := 0; off < len(frame); off += 64 << 10 {
				s.Write(frame[off : off+64<<10])
			}
		}
	})
	b.Run("crc32", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			Checksum(frame)
		}
	})
}

// BenchmarkChecksumRange is Checksum of one batch-sized range of a bound
// frame: its edges read again and one Shift, per batch.
func BenchmarkChecksumRange(b *testing.B) {
	frame := make([]byte, 1<<20)
	var s Sums
	s.Write(frame)
	s.Bind(frame)
	for _, size := range []int{16 << 10, 100 << 10, 1000 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			r := frame[100 : 100+size+61]
			for b.Loop() {
				if _, ok := s.Checksum(r); !ok {
					b.Fatal("no sum")
				}
			}
		})
	}
}
