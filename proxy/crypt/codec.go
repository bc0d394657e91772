// This file is crypt's use of internal/kcodec: decompressing a batch's
// records to rewrite them and compressing them again with their codec.

package crypt

import (
	"errors"
	"fmt"

	"golang.org/x/sync/semaphore"

	"github.com/kproxy/kproxy/internal/kcodec"
)

// codecs decompresses and compresses the records of a batch with
// internal/kcodec, the proxy's one home of Kafka's four codecs.
// Decompression is bounded twice, so that small batches cannot make the
// proxy allocate gigabytes: each batch by max bytes, and the decompressed
// records of all rewrites in flight, with their rewritten copies, by a
// shared budget (a rewrite that finds it used up fails with errBusy
// rather than wait while holding part of it).
type codecs struct {
	dec    *kcodec.Decoders
	enc    *kcodec.Encoders
	budget *semaphore.Weighted
	count  *metrics // nil: not counted
}

var (
	errMaxBatch = errors.New("crypt: batch decompresses beyond the limit")
	errBusy     = errors.New("crypt: the decompression budget of rewrites in flight is used up")
)

func newCodecs(max int, budget int64) (*codecs, error) {
	dec, err := kcodec.NewDecoders(max)
	if err != nil {
		return nil, fmt.Errorf("crypt: decoders: %w", err)
	}
	enc, err := kcodec.NewEncoders()
	if err != nil {
		dec.Close()
		return nil, fmt.Errorf("crypt: encoders: %w", err)
	}
	return &codecs{dec: dec, enc: enc, budget: semaphore.NewWeighted(budget)}, nil
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
// emptied first), its capacity covered by g.
func (c *codecs) decompress(dst, src []byte, codec int8, g *kcodec.Grant) ([]byte, error) {
	out, err := c.dec.Decompress(uint8(codec), dst[:0], src, g)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, kcodec.ErrTooLarge):
		return nil, errMaxBatch
	case errors.Is(err, kcodec.ErrBusy):
		return nil, errBusy
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
