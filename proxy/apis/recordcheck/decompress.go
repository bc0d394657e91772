// This file decompresses the records of a compressed batch into a pooled
// buffer, bounded: gzip, snappy (raw, or in the xerial framing the Java
// client writes), lz4 frames and zstd, with the decoders franz-go uses.

package recordcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"

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
	errTruncated = errors.New("compressed records end early")
	errXerial    = errors.New("malformed xerial snappy framing")
)

// keepBufBytes is the largest output buffer returned to the pool; a larger
// one (a rare huge batch) is left to the garbage collector rather than
// held by an idle pool.
const keepBufBytes = 8 << 20

// decoders holds what decompressing needs, reused across calls: one zstd
// decoder (safe for concurrent use), pooled gzip and lz4 readers, and
// pooled output buffers.
type decoders struct {
	max  int // the most bytes a batch may decompress to
	zstd *zstd.Decoder
	gz   sync.Pool // *gzipReader
	lz4  sync.Pool // *lz4Reader
	bufs sync.Pool // *[]byte
}

type gzipReader struct {
	src   bytes.Reader
	inner gzip.Reader
}

type lz4Reader struct {
	src   bytes.Reader
	inner *lz4.Reader
}

func newDecoders(max int) (*decoders, error) {
	z, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max)))
	if err != nil {
		return nil, err
	}
	d := &decoders{max: max, zstd: z}
	d.gz.New = func() any { return new(gzipReader) }
	d.lz4.New = func() any { return &lz4Reader{inner: lz4.NewReader(nil)} }
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

// decompress appends the decompressed src to dst (empty, pooled) and
// returns it; it fails with errTooLarge before the output passes d.max.
func (d *decoders) decompress(codec uint16, dst, src []byte) ([]byte, error) {
	switch codec {
	case codecGzip:
		r := d.gz.Get().(*gzipReader)
		defer d.gz.Put(r)
		r.src.Reset(src)
		if err := r.inner.Reset(&r.src); err != nil {
			return dst, err
		}
		return readBounded(dst, &r.inner, d.max)
	case codecLz4:
		r := d.lz4.Get().(*lz4Reader)
		defer d.lz4.Put(r)
		r.src.Reset(src)
		r.inner.Reset(&r.src)
		return readBounded(dst, r.inner, d.max)
	case codecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return xerial(dst, src, d.max)
		}
		return snappyBlock(dst, src, d.max)
	case codecZstd:
		out, err := d.zstd.DecodeAll(src, dst)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return out, errTooLarge
		}
		return out, err
	}
	return dst, errors.New("unknown codec")
}

// readBounded reads r to its end into dst, growing dst at most to limit.
func readBounded(dst []byte, r io.Reader, limit int) ([]byte, error) {
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
			dst = growTo(dst, limit)
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

// growTo doubles dst's capacity (at least 64 KiB), at most to limit.
func growTo(dst []byte, limit int) []byte {
	n := min(max(2*cap(dst), 64<<10), limit)
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
func snappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit-len(dst) {
		return dst, errTooLarge
	}
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
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
func xerial(dst, src []byte, limit int) ([]byte, error) {
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
		dst = append(make([]byte, 0, len(dst)+total), dst...)
	}
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		var err error
		if dst, err = snappyBlock(dst, src[4:4+size], limit); err != nil {
			return dst, err
		}
		src = src[4+size:]
	}
	return dst, nil
}
