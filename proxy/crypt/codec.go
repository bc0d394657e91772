package crypt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// codecs decompresses and compresses the records of a batch with Kafka's
// four codecs. Compression is franz-go's (the clients' own). Decompression
// is bounded by max bytes, so that a small batch cannot make the proxy
// allocate gigabytes (franz-go's exported decompressor is not bounded).
type codecs struct {
	max   int
	comp  [5]kgo.Compressor // by codec; [0] unused
	bufs  sync.Pool         // *bytes.Buffer for compression
	gz    sync.Pool         // *gzip.Reader
	lz    sync.Pool         // *lz4.Reader
	zstd  *zstd.Decoder     // safe for concurrent DecodeAll
	snapp kgo.Decompressor  // snappy, after its size claim is checked
	lz4h  []byte            // storedLZ4Header
}

var errMaxBatch = errors.New("crypt: batch decompresses beyond the limit")

func newCodecs(max int) (*codecs, error) {
	c := &codecs{max: max, snapp: kgo.DefaultDecompressor()}
	for codec, cc := range map[int8]kgo.CompressionCodec{
		codecGzip: kgo.GzipCompression(), codecSnappy: kgo.SnappyCompression(),
		codecLz4: kgo.Lz4Compression(), codecZstd: kgo.ZstdCompression(),
	} {
		comp, err := kgo.DefaultCompressor(cc)
		if err != nil {
			return nil, fmt.Errorf("crypt: compressor %d: %w", codec, err)
		}
		c.comp[codec] = comp
	}
	var err error
	if c.lz4h, err = storedLZ4Header(); err != nil {
		return nil, err
	}
	c.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(max)), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, fmt.Errorf("crypt: zstd decoder: %w", err)
	}
	return c, nil
}

func (c *codecs) close() { c.zstd.Close() }

// Kafka's codec numbers (the low bits of a batch's attributes).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

// decompress appends src decoded with codec to dst.
func (c *codecs) decompress(dst, src []byte, codec int8) ([]byte, error) {
	switch codec {
	case codecGzip:
		r, _ := c.gz.Get().(*gzip.Reader)
		if r == nil {
			r = new(gzip.Reader)
		}
		defer c.gz.Put(r)
		if err := r.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("crypt: gzip: %w", err)
		}
		return c.readAll(dst, r)
	case codecLz4:
		r, _ := c.lz.Get().(*lz4.Reader)
		if r == nil {
			r = lz4.NewReader(nil)
		}
		defer c.lz.Put(r)
		r.Reset(bytes.NewReader(src))
		return c.readAll(dst, r)
	case codecZstd:
		out, err := c.zstd.DecodeAll(src, dst)
		if err != nil {
			return nil, fmt.Errorf("crypt: zstd: %w", err)
		}
		return out, nil
	case codecSnappy:
		if err := c.snappyFits(src); err != nil {
			return nil, err
		}
		out, err := c.snapp.Decompress(src, kgo.CodecSnappy)
		if err != nil {
			return nil, fmt.Errorf("crypt: snappy: %w", err)
		}
		return append(dst, out...), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrFormat, codec)
}

// readAll appends what r decodes to dst, failing beyond c.max bytes.
func (c *codecs) readAll(dst []byte, r io.Reader) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > c.max {
			return nil, errMaxBatch
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, fmt.Errorf("crypt: decompress: %w", err)
		}
	}
}

// xerialMagic starts snappy in the Java clients' framing.
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyFits checks that src's decoded size, as its headers claim (which
// the decoder holds it to), is within c.max.
func (c *codecs) snappyFits(src []byte) error {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialMagic) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("crypt: snappy: %w", err)
		}
		if n > c.max {
			return errMaxBatch
		}
		return nil
	}
	total := 0
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return fmt.Errorf("%w: xerial framing", ErrFormat)
		}
		size := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if size < 0 || size > len(rest) {
			return fmt.Errorf("%w: xerial framing", ErrFormat)
		}
		n, err := s2.DecodedLen(rest[:size])
		if err != nil {
			return fmt.Errorf("crypt: snappy: %w", err)
		}
		if total += n; total > c.max {
			return errMaxBatch
		}
		rest = rest[size:]
	}
	return nil
}

// compress appends src encoded with codec to dst; stored asks for lz4's
// blocks to be stored (lz4stored.go).
func (c *codecs) compress(dst, src []byte, codec int8, stored bool) ([]byte, error) {
	if codec == codecLz4 && stored {
		return appendStoredLZ4(dst, c.lz4h, src), nil
	}
	if codec <= codecNone || int(codec) >= len(c.comp) {
		return nil, fmt.Errorf("%w: codec %d", ErrFormat, codec)
	}
	buf, _ := c.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer c.bufs.Put(buf)
	buf.Reset()
	out, used := c.comp[codec].Compress(buf, src)
	if int8(used) != codec {
		return nil, fmt.Errorf("crypt: compress with codec %d failed", codec)
	}
	return append(dst, out...), nil
}
