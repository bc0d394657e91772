// CRC-32C by carry-less multiplication with AVX-512 (clmul_amd64.go):
// four 512-bit accumulators folded 256 bytes at a time, reduced to 128
// bits and then to 32 by Barrett reduction, after Intel's "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ". The constants are
// x^n mod P for the Castagnoli polynomial, bit-reflected to 33 bits
// (TestFoldConstants derives them).

#include "textflag.h"

// Fold by 2048 bits (256 bytes): x^2080, x^2016; splatted over 4 lanes.
DATA k2048<>+0(SB)/8, $0x0dcb17aa4
DATA k2048<>+8(SB)/8, $0x0b9e02b86
DATA k2048<>+16(SB)/8, $0x0dcb17aa4
DATA k2048<>+24(SB)/8, $0x0b9e02b86
DATA k2048<>+32(SB)/8, $0x0dcb17aa4
DATA k2048<>+40(SB)/8, $0x0b9e02b86
DATA k2048<>+48(SB)/8, $0x0dcb17aa4
DATA k2048<>+56(SB)/8, $0x0b9e02b86
GLOBL k2048<>(SB), RODATA, $64

// Fold by 512 bits (64 bytes): x^544, x^480.
DATA k512<>+0(SB)/8, $0x0740eef02
DATA k512<>+8(SB)/8, $0x09e4addf8
DATA k512<>+16(SB)/8, $0x0740eef02
DATA k512<>+24(SB)/8, $0x09e4addf8
DATA k512<>+32(SB)/8, $0x0740eef02
DATA k512<>+40(SB)/8, $0x09e4addf8
DATA k512<>+48(SB)/8, $0x0740eef02
DATA k512<>+56(SB)/8, $0x09e4addf8
GLOBL k512<>(SB), RODATA, $64

// Fold by 128 bits: x^160, x^96.
DATA k128<>+0(SB)/8, $0x0f20c0dfe
DATA k128<>+8(SB)/8, $0x14cd00bd6
GLOBL k128<>(SB), RODATA, $16

// x^64, and the polynomial with its Barrett constant.
DATA k64<>+0(SB)/8, $0x0dd45aab8
GLOBL k64<>(SB), RODATA, $8
DATA kpoly<>+0(SB)/8, $0x105ec76f1
DATA kpoly<>+8(SB)/8, $0x0dea713f1
GLOBL kpoly<>(SB), RODATA, $16

// func foldAVX512(crc uint32, p []byte) uint32
// crc is the register (not inverted); len(p) >= 256 and a multiple of 64.
TEXT ·foldAVX512(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVD     AX, X10 // zeroes the rest of Z10
	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z10, Z1, Z1
	ADDQ      $256, SI
	SUBQ      $256, CX
	CMPQ      CX, $256
	JB        fold4

	VMOVDQU64 k2048<>+0(SB), Z0

loop256:
	VMOVDQU64  (SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z4, Z8
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	CMPQ       CX, $256
	JAE        loop256

fold4:
	// Fold each accumulator into the next, 512 bits on: Z4 then holds all.
	VMOVDQU64  k512<>+0(SB), Z0
	VPCLMULQDQ $0x11, Z0, Z1, Z5
	VPCLMULQDQ $0x00, Z0, Z1, Z1
	VPTERNLOGD $0x96, Z5, Z1, Z2
	VPCLMULQDQ $0x11, Z0, Z2, Z5
	VPCLMULQDQ $0x00, Z0, Z2, Z2
	VPTERNLOGD $0x96, Z5, Z2, Z3
	VPCLMULQDQ $0x11, Z0, Z3, Z5
	VPCLMULQDQ $0x00, Z0, Z3, Z3
	VPTERNLOGD $0x96, Z5, Z3, Z4
	CMPQ       CX, $64
	JB         lanes

loop64:
	VMOVDQU64  (SI), Z11
	VPCLMULQDQ $0x11, Z0, Z4, Z5
	VPCLMULQDQ $0x00, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z4
	ADDQ       $64, SI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JAE        loop64

lanes:
	// The four 128-bit lanes of Z4, first to last, in X1..X4.
	VMOVDQA64     X4, X1
	VEXTRACTI32X4 $1, Z4, X2
	VEXTRACTI32X4 $2, Z4, X3
	VEXTRACTI32X4 $3, Z4, X4
	VZEROUPPER

	MOVOU     k128<>+0(SB), X0
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X2, X1
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X3, X1
	MOVOA     X1, X5
	PCLMULQDQ $0, X0, X1
	PCLMULQDQ $0x11, X0, X5
	PXOR      X5, X1
	PXOR      X4, X1

	// 128 bits to 64, then 64 to 32 (Barrett).
	PCMPEQB   X3, X3
	PCLMULQDQ $1, X1, X0
	PSRLDQ    $8, X1
	PXOR      X0, X1
	MOVOA     X1, X2
	MOVQ      k64<>+0(SB), X0
	PSRLQ     $32, X3
	PSRLDQ    $4, X2
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1
	MOVOU     kpoly<>+0(SB), X0
	MOVOA     X1, X2
	PAND      X3, X1
	PCLMULQDQ $0x10, X0, X1
	PAND      X3, X1
	PCLMULQDQ $0, X0, X1
	PXOR      X2, X1
	PEXTRD    $1, X1, AX
	MOVL      AX, ret+32(FP)
	RET
