// This file is Sums: prefix sums of a frame taken as its bytes arrive, and
// the CRC-32C of any range of the frame derived from them.

package crc32c

import "unsafe"

// Block is the distance between two prefix sums. Smaller reads fewer bytes
// again at a range's edges and holds a larger table, but costs more as the
// frame arrives: crc32's fastest loop (3 streams of 1,344 bytes) needs
// 4,032 bytes, and over 512- to 2,048-byte Blocks the sums took 1.4x the
// time of one call over the whole frame; at 4,096 bytes they take the same.
// The table is then 1/1024 of the frame, and each edge under 4 KiB, read
// again shortly after the frame arrived.
const Block = 4096

// Sums holds the CRC-32C of every Block-aligned prefix of a byte stream:
// Write the stream's bytes in order, Bind the frame that holds them, then
// Checksum any range of that frame. The zero value is ready; Reset starts a
// new stream and keeps the table's memory. A nil *Sums answers nothing.
type Sums struct {
	pre   []uint32 // pre[i]: CRC-32C of the stream's first i*Block bytes
	sum   uint32   // CRC-32C of the n bytes written
	n     int
	frame []byte // once bound: the n bytes written
}

// Reset starts a new stream.
func (s *Sums) Reset() {
	s.pre = append(s.pre[:0], 0) // the empty prefix
	s.sum, s.n, s.frame = 0, 0, nil
}

// Write adds the stream's next bytes.
func (s *Sums) Write(b []byte) {
	if len(s.pre) == 0 {
		s.Reset()
	}
	for len(b) > 0 {
		k := min(len(b), Block-s.n%Block)
		s.sum = Update(s.sum, b[:k])
		s.n += k
		if s.n%Block == 0 {
			s.pre = append(s.pre, s.sum)
		}
		b = b[k:]
	}
}

// Bind says that frame holds the bytes written, all of them: Checksum then
// answers for ranges of frame. It reports false (and binds nothing) when
// frame's length is not what was written.
func (s *Sums) Bind(frame []byte) bool {
	if len(frame) != s.n || len(s.pre) == 0 {
		return false
	}
	s.frame = frame
	return true
}

// Checksum is the CRC-32C of b, which must lie within the bound frame
// (share its memory); ok is false when it does not, or nothing is bound.
// It reads only the bytes of b outside its whole Blocks.
func (s *Sums) Checksum(b []byte) (sum uint32, ok bool) {
	if s == nil || len(s.frame) == 0 {
		return 0, false
	}
	start, ok := offset(s.frame, b)
	if !ok {
		return 0, false
	}
	end := start + len(b)
	bs := (start + Block - 1) / Block * Block // first whole Block
	be := end / Block * Block                 // past the last
	if bs >= be {
		return Checksum(b), true // no whole Block inside
	}
	// crc(start..be) = Shift(crc(start..bs), be-bs) ^ crc(bs..be), and
	// crc(bs..be) = pre(be) ^ Shift(pre(bs), be-bs): both shifts in one.
	head := Checksum(s.frame[start:bs])
	mid := Shift(head^s.pre[bs/Block], be-bs) ^ s.pre[be/Block]
	return Update(mid, s.frame[be:end]), true
}

// Offset is where b starts in the bound frame, if b lies within it (shares
// its memory): for a caller that keeps facts of its own about the frame's
// ranges.
func (s *Sums) Offset(b []byte) (int, bool) {
	if s == nil || len(s.frame) == 0 {
		return 0, false
	}
	return offset(s.frame, b)
}

// offset is where b starts in frame, if b lies within it. Go has no
// pointer subtraction: the addresses are compared as integers, which is
// sound while both slices are live (the caller holds them).
func offset(frame, b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	f := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if len(b) > len(frame) || p < f || p-f > uintptr(len(frame)-len(b)) {
		return 0, false
	}
	return int(p - f), true
}
