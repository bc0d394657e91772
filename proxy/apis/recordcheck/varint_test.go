package recordcheck

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// refVarint is Kafka's ByteUtils.readVarint as plainly as it reads: at
// most 5 bytes, the value within 32 bits, zig-zag decoded.
func refVarint(b []byte, p int) (int32, int, bool) {
	u, w := binary.Uvarint(b[p:])
	if w <= 0 || w > 5 || u > 0xffffffff {
		return 0, 0, false
	}
	v := uint32(u)
	return int32(v>>1) ^ -int32(v&1), p + w, true
}

// refVarlong is ByteUtils.readVarlong: at most 10 bytes within 64 bits.
func refVarlong(b []byte, p int) (int64, int, bool) {
	u, w := binary.Uvarint(b[p:])
	if w <= 0 {
		return 0, 0, false
	}
	return int64(u>>1) ^ -int64(u&1), p + w, true
}

// TestVarints: the decoders' fast paths (one and two bytes) and their
// loops agree with the reference on every encoding of up to three bytes,
// on random longer ones, at every offset and cut short at every length.
func TestVarints(t *testing.T) {
	var inputs [][]byte
	for v := range 1 << 16 { // every first and second byte
		inputs = append(inputs, []byte{byte(v), byte(v >> 8), 0x01})
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.Uint32()) | byte(rng.IntN(2))<<7
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		for cut := 0; cut <= len(in); cut++ {
			b := append([]byte{0x80}, in[:cut]...) // p = 1: not at the slice's start
			if cut == 0 {
				b = b[:1]
			}
			checkVarint(t, b, 1)
		}
	}
}

func checkVarint(t *testing.T, b []byte, p int) {
	t.Helper()
	if p >= len(b) {
		if _, _, ok := varint(b, p); ok {
			t.Fatalf("varint of nothing at %d of % x answered", p, b)
		}
		return
	}
	v, q, ok := varint(b, p)
	wv, wq, wok := refVarint(b, p)
	if ok != wok || ok && (v != wv || q != wq) {
		t.Fatalf("varint(% x, %d) = %d, %d, %v; want %d, %d, %v", b, p, v, q, ok, wv, wq, wok)
	}
	l, q, ok := varlong(b, p)
	wl, wq, wok := refVarlong(b, p)
	if ok != wok || ok && (l != wl || q != wq) {
		t.Fatalf("varlong(% x, %d) = %d, %d, %v; want %d, %d, %v", b, p, l, q, ok, wl, wq, wok)
	}
}
