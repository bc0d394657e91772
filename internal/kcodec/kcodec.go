// Package kcodec is the proxy's one home of Kafka's record compression
// codecs (gzip, snappy, lz4, zstd), both ways. Decoders decompress a
// batch's records into pooled buffers, bounded twice: each output by the
// largest batch the caller accepts, checked before it grows past it, and,
// when the caller gives a Grant a Budget, all outputs in flight together.
// Snappy is read raw or in the xerial framing the Java client writes.
// Encoders compress with franz-go's compressors (the clients' own), and
// write lz4 frames of stored blocks. Its limit: a batch is decompressed
// whole into memory (up to the bound), never streamed.
package kcodec

import "errors"

// Kafka's codecs: the low three bits of a batch's attributes (untyped,
// for the attributes' uint16 and the codec's uint8 alike).
const (
	None   = 0
	Gzip   = 1
	Snappy = 2
	Lz4    = 3
	Zstd   = 4
)

var (
	// ErrTooLarge: the output would pass the Decoders' bound.
	ErrTooLarge = errors.New("decompressed records exceed the bound")
	// ErrBusy: the Grant's Budget cannot cover the output.
	ErrBusy = errors.New("the decompression budget is in use by other checks")
	// ErrTruncated: the compressed stream ends early.
	ErrTruncated = errors.New("compressed records end early")
	// ErrXerial: snappy in a malformed xerial framing.
	ErrXerial = errors.New("malformed xerial snappy framing")
	// ErrCodec: a codec number Kafka does not know (or None).
	ErrCodec = errors.New("unknown codec")
)
