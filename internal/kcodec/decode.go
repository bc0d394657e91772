// This file decompresses the records of a compressed batch into a pooled
// buffer, with the decoders franz-go uses, reused across calls: the output
// is bounded by the Decoders' max before it grows past it, and its
// capacity is covered by the caller's Grant first.

package kcodec

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// keepBufBytes is the largest output buffer returned to the pool; a larger
// one (a rare huge batch) is left to the garbage collector rather than
// held by an idle pool.
const keepBufBytes = 8 << 20

// Decoders holds what decompressing needs, reused across calls: one zstd
// decoder (safe for concurrent use), pooled gzip, lz4 and zstd stream
// readers, and pooled output buffers. It is safe for concurrent use; Close
// releases it.
type Decoders struct {
	max  int // the most bytes a batch may decompress to
	zstd *zstd.Decoder
	gz   sync.Pool // *gzipReader
	lz4  sync.Pool // *lz4Reader
	// zstream holds the decoders of zstd streams without a content size.
	zstream sync.Pool // *zstdStream
	bufs    sync.Pool // *[]byte
}

type gzipReader struct {
	src   bytes.Reader
	inner gzip.Reader
}

// zstdStream is a zstd decoder for streams: synchronous (concurrency 1:
// no goroutines), its window bounded.
type zstdStream struct {
	src   bytes.Reader
	inner *zstd.Decoder
}

// zstdMaxWindow bounds a zstd stream's window, which the decoder holds
// besides the output: 8 MiB, what the format asks every decoder to support.
const zstdMaxWindow = 8 << 20

type lz4Reader struct {
	src   bytes.Reader
	inner *lz4.Reader
}

// NewDecoders returns Decoders whose outputs are at most max bytes.
func NewDecoders(max int) (*Decoders, error) {
	z, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max)),
		zstd.WithDecodeAllCapLimit(true)) // the output's capacity is what the grant holds
	if err != nil {
		return nil, err
	}
	d := &Decoders{max: max, zstd: z}
	d.gz.New = func() any { return new(gzipReader) }
	d.lz4.New = func() any { return &lz4Reader{inner: lz4.NewReader(nil)} }
	streamOpts := []zstd.DOption{zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(zstdMaxWindow)}
	first, err := zstd.NewReader(nil, streamOpts...)
	if err != nil {
		return nil, err
	}
	d.zstream.Put(&zstdStream{inner: first})
	d.zstream.New = func() any {
		z, _ := zstd.NewReader(nil, streamOpts...) // the options worked above
		return &zstdStream{inner: z}
	}
	return d, nil
}

// Max is the most bytes an output may hold.
func (d *Decoders) Max() int { return d.max }

// Close releases d's decoders; d must not be used after.
func (d *Decoders) Close() { d.zstd.Close() }

// GetBuf is an empty pooled buffer; PutBuf gives it back.
func (d *Decoders) GetBuf() *[]byte {
	if b, ok := d.bufs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// PutBuf gives b back to the pool (a nil or very large one is dropped).
func (d *Decoders) PutBuf(b *[]byte) {
	if b == nil || cap(*b) > keepBufBytes {
		return
	}
	*b = (*b)[:0]
	d.bufs.Put(b)
}

// Grant is the share of a Budget that one output holds: its buffer's
// capacity, reserved before the buffer grows. A Grant without a Budget
// reserves nothing (each output is still bounded by the Decoders' max).
type Grant struct {
	Budget *semaphore.Weighted
	held   int64
}

// reserve makes the grant cover n bytes, or fails with ErrBusy.
func (g *Grant) reserve(n int) error {
	if g.Budget == nil {
		return nil
	}
	if more := int64(n) - g.held; more > 0 {
		if !g.Budget.TryAcquire(more) {
			return ErrBusy
		}
		g.held += more
	}
	return nil
}

// Reserve makes the grant cover n bytes (a buffer of the caller's own,
// beside the Decoders' outputs), or fails with ErrBusy.
func (g *Grant) Reserve(n int) error { return g.reserve(n) }

// Release gives back what the grant holds.
func (g *Grant) Release() {
	if g.held > 0 {
		g.Budget.Release(g.held)
		g.held = 0
	}
}

// Decompress appends src decompressed with codec to dst, which must be
// empty (a pooled buffer, say), and returns it, its capacity covered by g;
// it fails with ErrTooLarge before the output passes d's max, and with
// ErrBusy when g's Budget cannot cover it.
func (d *Decoders) Decompress(codec uint8, dst, src []byte, g *Grant) ([]byte, error) {
	if err := g.reserve(cap(dst)); err != nil {
		return dst[:0:0], err // the pooled buffer is not ours to use
	}
	switch codec {
	case Gzip:
		r := d.gz.Get().(*gzipReader)
		defer d.gz.Put(r)
		r.src.Reset(src)
		if err := r.inner.Reset(&r.src); err != nil {
			return dst, err
		}
		return readBounded(dst, &r.inner, d.max, g)
	case Lz4:
		r := d.lz4.Get().(*lz4Reader)
		defer d.lz4.Put(r)
		r.src.Reset(src)
		r.inner.Reset(&r.src)
		return readBounded(dst, r.inner, d.max, g)
	case Snappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return xerial(dst, src, d.max, g)
		}
		return snappyBlock(dst, src, d.max, g)
	case Zstd:
		return d.unzstd(dst, src, g)
	}
	return dst, ErrCodec
}

// unzstd decodes a frame that declares its content size (as franz-go's
// and librdkafka's do) straight into a buffer of that size; anything else
// (a stream without it, as the Java client's, or several frames) is read
// as a stream, growing the buffer within the bound.
func (d *Decoders) unzstd(dst, src []byte, g *Grant) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return dst, err
	}
	if h.HasFCS {
		if h.FrameContentSize > uint64(d.max) {
			return dst, ErrTooLarge
		}
		size := int(h.FrameContentSize)
		if err := g.reserve(max(size, cap(dst))); err != nil {
			return dst, err
		}
		if cap(dst) < size {
			dst = make([]byte, 0, size)
		}
		if out, err := d.zstd.DecodeAll(src, dst[:0]); err == nil {
			return out, nil
		}
	}
	r := d.zstream.Get().(*zstdStream)
	defer d.zstream.Put(r)
	r.src.Reset(src)
	if err := r.inner.Reset(&r.src); err != nil {
		return dst, err
	}
	defer r.inner.Reset(nil) // drops src
	return readBounded(dst[:0], r.inner, d.max, g)
}

// readBounded reads r to its end into dst, growing dst at most to limit,
// each growth covered by g first.
func readBounded(dst []byte, r io.Reader, limit int, g *Grant) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			if len(dst) >= limit {
				// One byte more means the output is over the bound.
				var one [1]byte
				if n, err := io.ReadFull(r, one[:]); n > 0 {
					return dst, ErrTooLarge
				} else if err == io.EOF {
					return dst, nil
				} else {
					return dst, truncated(err)
				}
			}
			n := min(max(2*cap(dst), 64<<10), limit)
			if err := g.reserve(n); err != nil {
				return dst, err
			}
			dst = growTo(dst, n)
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return dst, truncated(err)
		}
	}
}

// growTo is dst with capacity n.
func growTo(dst []byte, n int) []byte {
	out := make([]byte, len(dst), n)
	copy(out, dst)
	return out
}

// truncated maps a stream that ends early to ErrTruncated (Kafka answers
// it INVALID_RECORD, as a premature EOF) and leaves other faults as they
// are (Kafka: a failed decompression).
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return err
}
