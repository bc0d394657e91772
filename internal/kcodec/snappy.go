// This file decodes snappy, raw (one block, as franz-go and librdkafka
// send it) or in the xerial framing of the Java client, each block's
// claimed length bounded before anything is allocated.

package kcodec

import (
	"encoding/binary"

	"github.com/klauspost/compress/s2"
)

// snappyBlock decodes one raw snappy block, its claimed length bounded
// before anything is allocated.
func snappyBlock(dst, src []byte, limit int, g *Grant) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit-len(dst) {
		return dst, ErrTooLarge
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
func xerial(dst, src []byte, limit int, g *Grant) ([]byte, error) {
	if len(src) < xerialHeaderLen {
		return dst, ErrXerial
	}
	src = src[xerialHeaderLen:]
	total := 0
	for rest := src; len(rest) > 0; {
		if len(rest) < 4 {
			return dst, ErrXerial
		}
		size := binary.BigEndian.Uint32(rest)
		if uint64(size) > uint64(len(rest)-4) {
			return dst, ErrXerial
		}
		n, err := s2.DecodedLen(rest[4 : 4+size])
		if err != nil {
			return dst, err
		}
		if total += n; total > limit-len(dst) {
			return dst, ErrTooLarge
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
