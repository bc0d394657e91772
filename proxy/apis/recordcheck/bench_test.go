package recordcheck

import (
	"testing"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"

	"github.com/kproxy/kproxy/internal/kwire"
)

// benchRecords is the benchmarks' batch: 1 KiB values, as the bench
// harness's produce-1k scenario sends them, 1,000 to a batch (~1 MiB).
const (
	benchRecords = 1000
	benchValue   = 1024
)

// BenchmarkCheck is level Full per codec, in bytes of the batch as sent
// (the CRC read from the batch); none-summed is the uncompressed batch with
// its CRC from the frame's sums, as the proxy checks it; framing and crc
// (framing plus the CRC-32C alone) are the uncompressed batch at lower
// costs, for comparison; walk is the record walk alone.
func BenchmarkCheck(b *testing.B) {
	full, framing := checker(b, Full, 0), checker(b, Framing, 0)
	plain := benchBatch(b, codecNone)
	b.Run("framing", func(b *testing.B) { benchCheck(b, framing, plain) })
	// The same as none, in two passes: the CRC, then the walk.
	b.Run("none-two-passes", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if !framing.Check(9, false, plain).OK() || kwire.BatchCRC(plain) == 0 || walk(plain[kwire.BatchHeaderLen:], benchRecords) != None {
				b.Fatal("refused")
			}
		}
	})
	// As the proxy checks: the CRC from the frame's sums, taken as the
	// frame was read (BenchmarkFrameSums in internal/crc32c is that cost).
	b.Run("none-summed", func(b *testing.B) {
		in, sums := inFrame(b, plain, 1)
		b.SetBytes(benchRecords * benchValue)
		b.ReportAllocs()
		for b.Loop() {
			if r := full.CheckSummed(9, false, in, sums); !r.OK() {
				b.Fatal(r)
			}
		}
	})
	b.Run("crc", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if framing.Check(9, false, plain).OK() && kwire.BatchCRC(plain) == 0 {
				b.Fatal("crc 0")
			}
		}
	})
	// The record walk alone: Check's cost above crc.
	b.Run("walk", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if r := walk(plain[kwire.BatchHeaderLen:], benchRecords); r != None {
				b.Fatal(r)
			}
		}
	})
	for _, c := range codecs {
		batch := benchBatch(b, c.ID)
		b.Run(c.Name, func(b *testing.B) { benchCheck(b, full, batch) })
	}
}

// benchBatch is benchRecords records of benchValue bytes of text (random
// words of a small alphabet: it compresses about as well as JSON).
func benchBatch(b *testing.B, codec uint8) []byte {
	var raw []byte
	j := probe.Junk(benchRecords*benchValue, 7)
	for i := range benchRecords {
		v := j[i*benchValue : (i+1)*benchValue]
		for k := range v {
			v[k] = "abcdefgh ,:{}0123xy"[v[k]%18]
		}
		raw = append(raw, record(int32(i), v)...)
	}
	return framed(codec, benchRecords, benchRecords-1, compress(b, codec, raw))
}

// benchCheck reports MB/s of the records (decompressed), as produced.
func benchCheck(b *testing.B, c *Checker, batch []byte) {
	b.SetBytes(benchRecords * benchValue)
	b.ReportAllocs()
	for b.Loop() {
		if r := c.Check(9, false, batch); !r.OK() {
			b.Fatal(r)
		}
	}
}

// BenchmarkDecompress is the decompression alone, with the same pooled
// decoders, of the batches BenchmarkCheck checks: Check's cost above it
// is the CRC and the record walk.
func BenchmarkDecompress(b *testing.B) {
	c := checker(b, Full, 0)
	for _, cd := range codecs[1:] {
		batch := benchBatch(b, cd.ID)
		b.Run(cd.Name, func(b *testing.B) {
			b.SetBytes(benchRecords * benchValue)
			b.ReportAllocs()
			for b.Loop() {
				buf, g := c.dec.getBuf(), grant{mem: c.dec.mem}
				out, err := c.dec.decompress(uint16(cd.ID), (*buf)[:0], batch[kwire.BatchHeaderLen:], &g)
				if err != nil {
					b.Fatal(err)
				}
				*buf = out[:0]
				c.dec.putBuf(buf)
				g.release()
			}
		})
	}
}
