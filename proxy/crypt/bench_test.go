package crypt

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// The cost of encryption per byte of record values: batches of 100
// records of 1 KiB, as a producer sends them, encrypted (and, for a
// compressed batch, decompressed and recompressed) on one goroutine.
// Targets (issue 30): 1 GB/s per core uncompressed, 300 MB/s with lz4.

func benchBatch(b *testing.B, s *Service, codec int8) ([]byte, int) {
	return benchBatchOf(b, s, codec, 100)
}

// benchBatchOf is a batch of n such records.
func benchBatchOf(b *testing.B, s *Service, codec int8, n int) ([]byte, int) {
	recs := make([]rec, n)
	total := 0
	for i := range recs {
		v := make([]byte, 1024)
		if codec == codecNone {
			rand.Read(v)
		} else { // compressible, as text is
			copy(v, fmt.Sprintf("%0256d", i))
			for j := 256; j < len(v); j++ {
				v[j] = "kproxy record value "[j%20]
			}
		}
		recs[i] = rec{key: fmt.Appendf(nil, "key-%d", i), value: v}
		total += len(v)
	}
	return buildBatch(b, s.codecs, codec, recs...), total
}

func BenchmarkEncrypt(b *testing.B) {
	for _, codec := range []int8{codecNone, codecLz4, codecZstd, codecSnappy, codecGzip} {
		b.Run(codecNames[codec], func(b *testing.B) {
			s := newService(b, newMemKMS(), nil, "")
			in, total := benchBatch(b, s, codec)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			var buf []byte // reused, as the proxy reuses its pooled frames
			for b.Loop() {
				out, _, code := s.Encrypt(context.Background(), buf, "secret-bench", 0, in)
				if code != 0 {
					b.Fatal(code)
				}
				buf = out
			}
		})
	}
}

func BenchmarkDecrypt(b *testing.B) {
	for _, codec := range []int8{codecNone, codecLz4} {
		b.Run(codecNames[codec], func(b *testing.B) {
			s := newService(b, newMemKMS(), nil, "")
			in, total := benchBatch(b, s, codec)
			enc, _ := encrypt(s, "secret-bench", in)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				if _, code := s.Decrypt(context.Background(), "secret-bench", 0, enc); code != 0 {
					b.Fatal(code)
				}
			}
		})
	}
}

// BenchmarkGCMOnly is the cipher alone on the same values: the ceiling
// BenchmarkEncrypt/none is measured against (side by side, in one run).
func BenchmarkGCMOnly(b *testing.B) {
	s := newService(b, newMemKMS(), nil, "")
	d, err := s.keys.sealerFor(context.Background(), s.cur.Load().kms, "k", 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	v, nonce := make([]byte, 1024), make([]byte, NonceSize)
	rand.Read(v)
	out := make([]byte, 0, 100*(1024+TagSize))
	b.SetBytes(100 * 1024)
	for b.Loop() {
		out = out[:0]
		for range 100 {
			out = seal(out, d.aead, nonce, v)
		}
	}
}

// BenchmarkValidateEncrypt is the produce path's work on a compressed
// batch of 1,000 records of 1 KiB to an encrypted topic at
// --produce-validation full: validation (recordcheck) then encryption,
// done two ways in turn within each iteration, so that a loaded machine
// slows both alike: "again", encryption decompressing the batch after
// validation did (Encrypt, main's produce path), and "checked", encryption
// using the records validation decompressed (EncryptChecked). It reports
// each one's ns/op and the ratio; the difference is one decompression and
// one CRC-32C pass.
func BenchmarkValidateEncrypt(b *testing.B) {
	chk, err := recordcheck.New(recordcheck.Config{Level: recordcheck.Full})
	if err != nil {
		b.Fatal(err)
	}
	defer chk.Close()
	for _, codec := range []int8{codecLz4, codecZstd, codecSnappy, codecGzip} {
		b.Run(codecNames[codec], func(b *testing.B) {
			s := newService(b, newMemKMS(), nil, "")
			in, total := benchBatchOf(b, s, codec, 1000) // about 1 MB
			b.SetBytes(int64(2 * total))
			var buf []byte
			var spent [2]time.Duration // again, checked
			i := 0
			for b.Loop() {
				for k := range 2 {
					checked := (i+k)%2 == 1 // each goes first every other iteration
					start := time.Now()
					buf = validateEncrypt(b, chk, s, buf, in, checked)
					spent[boolIndex(checked)] += time.Since(start)
				}
				i++
			}
			again, checked := float64(spent[0])/float64(i), float64(spent[1])/float64(i)
			b.ReportMetric(again, "again-ns/op")
			b.ReportMetric(checked, "checked-ns/op")
			b.ReportMetric(checked/again, "checked/again")
		})
	}
}

func boolIndex(v bool) int {
	if v {
		return 1
	}
	return 0
}

// validateEncrypt is validation of in, then its encryption into buf, with
// the records validation read (checked) or decompressing them again.
func validateEncrypt(b *testing.B, chk *recordcheck.Checker, s *Service, buf, in []byte, checked bool) []byte {
	var batch recordcheck.Batch
	defer batch.Release()
	if r := chk.CheckBatch(9, false, in, &batch); !r.OK() {
		b.Fatal(r.Reason)
	}
	var code int16
	if checked {
		buf, _, code = s.EncryptChecked(context.Background(), buf, "secret-bench", 0, in, &batch)
	} else {
		buf, _, code = s.Encrypt(context.Background(), buf, "secret-bench", 0, in)
	}
	if code != 0 {
		b.Fatal(code)
	}
	return buf
}
