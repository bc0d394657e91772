package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestFold: the vector fold agrees with crc32 for every length around its
// steps (the 256-byte loop, the 64-byte tail, the bytes left to crc32),
// at unaligned starts and from any register.
func TestFold(t *testing.T) {
	if !haveFold {
		t.Skip("no AVX-512 carry-less multiplication on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 3*4096+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 3*4096; n++ {
		if n > 1200 && n%61 != 0 {
			continue // the longer lengths sampled: every step is covered below 1,200
		}
		off := rng.IntN(64)
		b := buf[off : off+n]
		sum := rng.Uint32()
		if got, want := update(sum, b), crc32.Update(sum, castagnoli, b); got != want {
			t.Fatalf("%d bytes at offset %d from %#08x: %#08x, want %#08x", n, off, sum, got, want)
		}
	}
}

// TestFoldConstants derives the fold's constants (clmul_amd64.s): x^n
// modulo the Castagnoli polynomial, bit-reflected to 33 bits; and the
// Barrett constant floor(x^64 / P), reflected likewise.
func TestFoldConstants(t *testing.T) {
	const p = 0x11edc6f41 // x^32 + ... + 1, the highest power first
	xn := func(n int) uint64 {
		r := uint64(1)
		for range n {
			if r <<= 1; r&(1<<32) != 0 {
				r ^= p
			}
		}
		return r
	}
	reflect33 := func(v uint64) uint64 {
		var r uint64
		for i := range 33 {
			r |= (v >> i & 1) << (32 - i)
		}
		return r
	}
	for _, c := range []struct {
		n    int
		want uint64
	}{{2080, 0x0dcb17aa4}, {2016, 0x0b9e02b86}, {544, 0x0740eef02}, {480, 0x09e4addf8}, {160, 0x0f20c0dfe}, {96, 0x14cd00bd6}, {64, 0x0dd45aab8}} {
		if got := reflect33(xn(c.n)); got != c.want {
			t.Errorf("x^%d: %#x, want %#x", c.n, got, c.want)
		}
	}
	if got := reflect33(p); got != 0x105ec76f1 {
		t.Errorf("P reflected: %#x", got)
	}
	var q, rem uint64 = 0, 1 << 32 // x^64 / P, one quotient bit per step from x^32 down
	for i := 32; i >= 0; i-- {
		if rem&(1<<32) != 0 {
			q |= 1 << i
			rem ^= p
		}
		rem <<= 1
	}
	if got := reflect33(q); got != 0x0dea713f1 {
		t.Errorf("Barrett constant: %#x, want 0xdea713f1", got)
	}
}
