// This file is crypt's use of internal/kcodec: decompressing a batch's
// records to rewrite them and compressing them again with their codec.

package crypt

import (
	"errors"
	"fmt"

	"github.com/kproxy/kproxy/internal/kcodec"
)

// codecs decompresses and compresses the records of a batch with
// internal/kcodec, the proxy's one home of Kafka's four codecs.
// Decompression is bounded by max bytes, so that a small batch cannot make
// the proxy allocate gigabytes; it draws on no shared budget (a batch is
// rewritten by one goroutine, into scratch buffers it reuses).
type codecs struct {
	dec   *kcodec.Decoders
	enc   *kcodec.Encoders
	count *metrics // nil: not counted
}

var errMaxBatch = errors.New("crypt: batch decompresses beyond the limit")

func newCodecs(max int) (*codecs, error) {
	dec, err := kcodec.NewDecoders(max)
	if err != nil {
		return nil, fmt.Errorf("crypt: decoders: %w", err)
	}
	enc, err := kcodec.NewEncoders()
	if err != nil {
		dec.Close()
		return nil, fmt.Errorf("crypt: encoders: %w", err)
	}
	return &codecs{dec: dec, enc: enc}, nil
}

func (c *codecs) close() { c.dec.Close() }

// Kafka's codec numbers (the low bits of a batch's attributes).
const (
	codecNone   = kcodec.None
	codecGzip   = kcodec.Gzip
	codecSnappy = kcodec.Snappy
	codecLz4    = kcodec.Lz4
	codecZstd   = kcodec.Zstd
)

// decompress returns src decoded with codec, into dst's space (dst is
// emptied first).
func (c *codecs) decompress(dst, src []byte, codec int8) ([]byte, error) {
	var g kcodec.Grant // no budget: max bounds each batch
	out, err := c.dec.Decompress(uint8(codec), dst[:0], src, &g)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, kcodec.ErrTooLarge):
		return nil, errMaxBatch
	case errors.Is(err, kcodec.ErrCodec):
		return nil, fmt.Errorf("%w: codec %d", ErrFormat, codec)
	}
	return nil, fmt.Errorf("crypt: decompress codec %d: %w", codec, err)
}

// compress appends src encoded with codec to dst; stored asks for lz4's
// blocks to be stored, not compressed (see rewriteBatch).
func (c *codecs) compress(dst, src []byte, codec int8, stored bool) ([]byte, error) {
	if codec == codecLz4 && stored {
		return c.enc.StoredLZ4(dst, src), nil
	}
	out, err := c.enc.Compress(dst, src, uint8(codec))
	if errors.Is(err, kcodec.ErrCodec) {
		return nil, fmt.Errorf("%w: codec %d", ErrFormat, codec)
	}
	return out, err
}
