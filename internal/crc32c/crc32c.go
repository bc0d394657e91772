// Package crc32c computes the CRC-32C (Castagnoli) of Kafka's record
// batches from prefix sums taken while a frame's bytes arrive: Sums sees
// each chunk once, right after it is read (while it is in the cache), and
// later answers the CRC of any range of the frame reading only the few
// bytes at the range's edges, not the range again.
//
// It promises exactly crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
// for every range b of the frame. Its limits: the prefix table holds 4
// bytes per Block of the frame, and the bytes at a range's edges (under a
// Block at each end; all of a range with no whole Block inside) are read
// again. On amd64 with AVX-512's carry-less multiplication, ranges of 512
// bytes or more are folded 256 bytes a step (clmul_amd64.s); elsewhere,
// and for the bytes left over, crc32's own loop runs.
package crc32c

import "hash/crc32"

// castagnoli is crc32's table, which selects its hardware CRC-32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC-32C of b.
func Checksum(b []byte) uint32 { return update(0, b) }

// Update is the CRC-32C of A||b where sum is the CRC-32C of A.
func Update(sum uint32, b []byte) uint32 { return update(sum, b) }

// Shift is what makes sums of ranges combine: Shift(crc(A), len(B)) ^
// crc(B) is crc(A||B), for any A and B (the pre- and post-inversion of
// crc32 cancel out in that sum). It multiplies sum by x^(8n) modulo the
// polynomial, in the reflected bit order crc32 uses: one multiplication per
// set bit of n.
func Shift(sum uint32, n int) uint32 {
	for k := 3; n > 0; k++ { // x^(8n) is the product of x^(2^k) for n's set bits, k from 3
		if n&1 != 0 {
			sum = mulMod(x2n[k], sum)
		}
		n >>= 1
	}
	return sum
}

// poly is the Castagnoli polynomial, reflected (bit 31 is x^0).
const poly = 0x82f63b78

// x2n[k] is x^(2^k) modulo poly, for every k Shift can reach (3 + the 63
// bits of a positive int).
var x2n = makeX2n()

func makeX2n() [66]uint32 {
	var t [66]uint32
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulMod(p, p)
	}
	return t
}

// mulMod is a*b modulo poly, without branches on the data.
func mulMod(a, b uint32) uint32 {
	var p uint32
	for range 32 {
		p ^= b & uint32(int32(a)>>31) // a's top bit is its x^0 term: add b
		a <<= 1
		b = b>>1 ^ poly&-(b&1) // b times x
	}
	return p
}
