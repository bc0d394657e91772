// This file decompresses the records of a compressed batch into a pooled
// buffer, bounded twice: each batch by the largest the proxy accepts, and
// all batches being checked at once by a shared budget, so that many small
// compressed requests cannot make the proxy hold many large outputs. Codecs:
// gzip, snappy (raw, or in the xerial framing the Java client writes), lz4
// frames and zstd, with the decoders franz-go uses.

package recordcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs (attribute bits 0-2).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

var (
	errTooLarge  = errors.New("decompressed records exceed the bound")
	errBusy      = errors.New("the decompression budget is in use by other checks")
	errTruncated = errors.New("compressed records end early")
	errXerial    = errors.New("malformed xerial snappy framing")
)

// keepBufBytes is the largest output buffer returned to the pool; a larger
// one (a rare huge batch) is left to the garbage collector rather than
// held by an idle pool.
const keepBufBytes = 8 << 20

// decoders holds what decompressing needs, reused across calls: one zstd
// decoder (safe for concurrent use), pooled gzip and lz4 readers, and
// pooled output buffers, with the budget of output bytes that checks in
// flight may hold together.
type decoders struct {
	max  int                 // the most bytes a batch may decompress to
	mem  *semaphore.Weighted // output capacity held by checks in flight
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

func newDecoders(max int, budget int64) (*decoders, error) {
	z, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max)),
		zstd.WithDecodeAllCapLimit(true)) // the output's capacity is what the grant holds
	if err != nil {
		return nil, err
	}
	d := &decoders{max: max, mem: semaphore.NewWeighted(budget), zstd: z}
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

func (d *decoders) close() { d.zstd.Close() }

// getBuf is an empty pooled buffer; putBuf gives it back.
func (d *decoders) getBuf() *[]byte {
	if b, ok := d.bufs.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func (d *decoders) putBuf(b *[]byte) {
	if b == nil || cap(*b) > keepBufBytes {
		return
	}
	*b = (*b)[:0]
	d.bufs.Put(b)
}

// grant is the share of the decompression budget one check holds: the
// capacity of its output buffer, reserved before the buffer grows.
type grant struct {
	mem  *semaphore.Weighted
	held int64
}

// reserve makes the grant cover n bytes, or fails with errBusy.
func (g *grant) reserve(n int) error {
	if more := int64(n) - g.held; more > 0 {
		if !g.mem.TryAcquire(more) {
			return errBusy
		}
		g.held += more
	}
	return nil
}

// release gives back what the grant holds.
func (g *grant) release() {
	if g.held > 0 {
		g.mem.Release(g.held)
		g.held = 0
	}
}

// decompress appends the decompressed src to dst (empty, pooled) and
// returns it, its capacity covered by g; it fails with errTooLarge before
// the output passes d.max, and with errBusy when the budget cannot cover it.
func (d *decoders) decompress(codec uint16, dst, src []byte, g *grant) ([]byte, error) {
	if err := g.reserve(cap(dst)); err != nil {
		return dst[:0:0], err // the pooled buffer is not ours to use
	}
	switch codec {
	case codecGzip:
		r := d.gz.Get().(*gzipReader)
		defer d.gz.Put(r)
		r.src.Reset(src)
		if err := r.inner.Reset(&r.src); err != nil {
			return dst, err
		}
		return readBounded(dst, &r.inner, d.max, g)
	case codecLz4:
		r := d.lz4.Get().(*lz4Reader)
		defer d.lz4.Put(r)
		r.src.Reset(src)
		r.inner.Reset(&r.src)
		return readBounded(dst, r.inner, d.max, g)
	case codecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return xerial(dst, src, d.max, g)
		}
		return snappyBlock(dst, src, d.max, g)
	case codecZstd:
		return d.unzstd(dst, src, g)
	}
	return dst, errors.New("unknown codec")
}

// unzstd decodes a frame that declares its content size (as franz-go's
// and librdkafka's do) straight into a buffer of that size; anything else
// (a stream without it, as the Java client's, or several frames) is read
// as a stream, growing the buffer within the bound.
func (d *decoders) unzstd(dst, src []byte, g *grant) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return dst, err
	}
	if h.HasFCS {
		if h.FrameContentSize > uint64(d.max) {
			return dst, errTooLarge
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
func readBounded(dst []byte, r io.Reader, limit int, g *grant) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			if len(dst) >= limit {
				// One byte more means the output is over the bound.
				var one [1]byte
				if n, err := io.ReadFull(r, one[:]); n > 0 {
					return dst, errTooLarge
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

// truncated maps a stream that ends early to errTruncated (Kafka answers
// it INVALID_RECORD, as a premature EOF) and leaves other faults as they
// are (Kafka: a failed decompression).
func truncated(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncated
	}
	return err
}

// snappyBlock decodes one raw snappy block, its claimed length bounded
// before anything is allocated.
func snappyBlock(dst, src []byte, limit int, g *grant) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit-len(dst) {
		return dst, errTooLarge
	}
	if cap(dst)-len(dst) < n {
		if err := g.reserve(len(dst) + n); err != nil {
			return dst, err
		}
		dst = growTo(dst, len(dst)+n)
	}
	out, err := s2.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+len(out)], nil
}

// xerialMagic starts the framing of the Java client's SnappyOutputStream:
// the magic, then a version and a compatible version (4 bytes each), then
// chunks of a big-endian length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

// xerial decodes xerial-framed snappy: the chunks' claimed lengths are
// summed and bounded first, so dst grows once.
func xerial(dst, src []byte, limit int, g *grant) ([]byte, error) {
	if len(src) < xerialHeaderLen {
		return dst, errXerial
	}
	src = src[xerialHeaderLen:]
	total := 0
	for rest := src; len(rest) > 0; {
		if len(rest) < 4 {
			return dst, errXerial
		}
		size := binary.BigEndian.Uint32(rest)
		if uint64(size) > uint64(len(rest)-4) {
			return dst, errXerial
		}
		n, err := s2.DecodedLen(rest[4 : 4+size])
		if err != nil {
			return dst, err
		}
		if total += n; total > limit-len(dst) {
			return dst, errTooLarge
		}
		rest = rest[4+size:]
	}
	if cap(dst)-len(dst) < total {
		if err := g.reserve(len(dst) + total); err != nil {
			return dst, err
		}
		dst = growTo(dst, len(dst)+total)
	}
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		var err error
		if dst, err = snappyBlock(dst, src[4:4+size], limit, g); err != nil {
			return dst, err
		}
		src = src[4+size:]
	}
	return dst, nil
}
