// This file is the Checker's decompression: internal/kcodec's Decoders
// (the proxy's one home of the codecs), bounded twice: each batch by the
// largest the proxy accepts, and all batches being checked at once by a
// shared budget, so that many small compressed requests cannot make the
// proxy hold many large outputs.

package recordcheck

import (
	"golang.org/x/sync/semaphore"

	"github.com/kproxy/kproxy/internal/kcodec"
)

// Compression codecs (attribute bits 0-2).
const (
	codecNone   = kcodec.None
	codecGzip   = kcodec.Gzip
	codecSnappy = kcodec.Snappy
	codecLz4    = kcodec.Lz4
	codecZstd   = kcodec.Zstd
)

var (
	errTooLarge  = kcodec.ErrTooLarge
	errBusy      = kcodec.ErrBusy
	errTruncated = kcodec.ErrTruncated
)

// decoders is the codecs' Decoders with the budget of output bytes that
// checks in flight may hold together.
type decoders struct {
	k   *kcodec.Decoders
	max int                 // the most bytes a batch may decompress to
	mem *semaphore.Weighted // output capacity held by checks in flight
}

func newDecoders(max int, budget int64) (*decoders, error) {
	k, err := kcodec.NewDecoders(max)
	if err != nil {
		return nil, err
	}
	return &decoders{k: k, max: max, mem: semaphore.NewWeighted(budget)}, nil
}

func (d *decoders) close() { d.k.Close() }

// getBuf is an empty pooled buffer; putBuf gives it back.
func (d *decoders) getBuf() *[]byte  { return d.k.GetBuf() }
func (d *decoders) putBuf(b *[]byte) { d.k.PutBuf(b) }

// grant is the share of the budget mem that one check holds: the capacity
// of its output buffer, reserved before the buffer grows.
type grant struct {
	mem  *semaphore.Weighted
	held kcodec.Grant
}

// release gives back what the grant holds.
func (g *grant) release() { g.held.Release() }

// decompress appends the decompressed src to dst (empty, pooled) and
// returns it, its capacity covered by g; it fails with errTooLarge before
// the output passes d.max, and with errBusy when the budget cannot cover it.
func (d *decoders) decompress(codec uint16, dst, src []byte, g *grant) ([]byte, error) {
	g.held.Budget = g.mem
	return d.k.Decompress(uint8(codec), dst, src, &g.held)
}
