// This file compresses records with franz-go's compressors (the clients'
// own, pooled by franz-go), into pooled scratch buffers.

package kcodec

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Encoders compresses with each of Kafka's codecs; it is safe for
// concurrent use.
type Encoders struct {
	comp [Zstd + 1]kgo.Compressor // by codec; [None] unused
	bufs sync.Pool                // *bytes.Buffer
	lz4h []byte                   // storedLZ4Header
}

// NewEncoders returns Encoders at franz-go's default levels.
func NewEncoders() (*Encoders, error) {
	e := &Encoders{}
	for codec, cc := range map[uint8]kgo.CompressionCodec{
		Gzip: kgo.GzipCompression(), Snappy: kgo.SnappyCompression(),
		Lz4: kgo.Lz4Compression(), Zstd: kgo.ZstdCompression(),
	} {
		comp, err := kgo.DefaultCompressor(cc)
		if err != nil {
			return nil, fmt.Errorf("kcodec: compressor %d: %w", codec, err)
		}
		e.comp[codec] = comp
	}
	var err error
	if e.lz4h, err = storedLZ4Header(); err != nil {
		return nil, err
	}
	e.bufs.New = func() any { return new(bytes.Buffer) }
	return e, nil
}

// Compress appends src compressed with codec to dst.
func (e *Encoders) Compress(dst, src []byte, codec uint8) ([]byte, error) {
	if codec == None || int(codec) >= len(e.comp) {
		return nil, fmt.Errorf("%w: %d", ErrCodec, codec)
	}
	buf := e.bufs.Get().(*bytes.Buffer)
	defer e.bufs.Put(buf)
	buf.Reset()
	out, used := e.comp[codec].Compress(buf, src)
	if uint8(used) != codec {
		return nil, fmt.Errorf("kcodec: compress with codec %d failed", codec)
	}
	return append(dst, out...), nil
}
