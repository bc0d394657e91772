package kcodec

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Stored LZ4 frames read back with franz-go's decoder (the clients' own)
// and with Decoders, across the 4 MiB block boundary and empty.
func TestStoredLZ4ReadsWithFranzGo(t *testing.T) {
	e, d := codecs(t, 64<<20)
	for _, n := range []int{0, 1, 1000, lz4Block, lz4Block + 17} {
		src := make([]byte, n)
		rand.Read(src)
		frame := e.StoredLZ4(nil, src)
		got, err := kgo.DefaultDecompressor().Decompress(frame, kgo.CodecLz4)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%d bytes: franz-go read %d bytes, %v", n, len(got), err)
		}
		if got, err := d.Decompress(Lz4, nil, frame, &Grant{}); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%d bytes: read back %d bytes, %v", n, len(got), err)
		}
	}
}
