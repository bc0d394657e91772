package crypt

import (
	"context"
	"testing"
)

// FuzzDecryptEncrypt feeds arbitrary record data (as a broker or a client
// could send it) to Decrypt and Encrypt: neither may panic, and an error
// always comes with a code and no records.
func FuzzDecryptEncrypt(f *testing.F) {
	s := newService(f, newMemKMS(), nil, "")
	for _, codec := range []int8{codecNone, codecGzip, codecSnappy, codecLz4, codecZstd} {
		in := buildBatch(f, s.codecs, codec, rec{key: []byte("k"), value: []byte("v")}, rec{value: nil})
		enc, _ := encrypt(s, "secret-a", in)
		f.Add(in)
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if out, code := s.Decrypt(context.Background(), "secret-a", 0, data); code != 0 && out != nil {
			t.Fatalf("decrypt: code %d with %d bytes", code, len(out))
		}
		if out, rewritten, code := s.Encrypt(context.Background(), nil, "secret-a", 0, data); code != 0 && (out != nil || rewritten) {
			t.Fatalf("encrypt: code %d with %d bytes", code, len(out))
		}
	})
}
