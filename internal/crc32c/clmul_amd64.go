// This file selects the AVX-512 carry-less multiplication for long
// ranges (clmul_amd64.s): where the CPU has it, four times the bytes per
// cycle of crc32's SSE 4.2 loop, whose three streams of the CRC32
// instruction are bound by its latency.

package crc32c

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// foldAVX512 is the CRC-32C register after p from register crc; len(p)
// is at least 256 and a multiple of 64.
//
//go:noescape
func foldAVX512(crc uint32, p []byte) uint32

// haveFold reports whether foldAVX512 may run: AVX-512 (with the OS
// saving its registers) and its carry-less multiplication.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41

// minFold is the shortest range worth the vector setup; below it crc32's
// loop is as fast.
const minFold = 512

// update is Update with the longest multiple of 64 bytes of b folded by
// foldAVX512 when it can.
func update(sum uint32, b []byte) uint32 {
	if haveFold && len(b) >= minFold {
		n := len(b) &^ 63
		sum = ^foldAVX512(^sum, b[:n])
		b = b[n:]
	}
	return crc32.Update(sum, castagnoli, b)
}
