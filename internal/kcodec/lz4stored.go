// This file writes LZ4 frames whose blocks are stored, not compressed:
// valid LZ4 (stored blocks are part of the frame format) that every client
// reads, for data that would not compress anyway.

package kcodec

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/pierrec/lz4/v4"
)

// lz4Block is the block size of stored frames: the largest LZ4 has.
const lz4Block = 4 << 20

// storedLZ4Header is the frame header (magic, descriptor with 4 MiB
// blocks and no checksums, the descriptor's checksum byte) as pierrec's
// writer makes it, taken from an empty frame so that no checksum is
// computed here.
func storedLZ4Header() ([]byte, error) {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false)); err != nil {
		return nil, fmt.Errorf("kcodec: lz4 options: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("kcodec: lz4 frame: %w", err)
	}
	b := buf.Bytes()
	if len(b) < 4+3+4 || binary.LittleEndian.Uint32(b[len(b)-4:]) != 0 {
		return nil, fmt.Errorf("kcodec: unexpected empty lz4 frame %x", b)
	}
	return bytes.Clone(b[:len(b)-4]), nil // without the end mark
}

// StoredLZ4 appends src to dst as an LZ4 frame of stored blocks.
func (e *Encoders) StoredLZ4(dst, src []byte) []byte {
	dst = append(dst, e.lz4h...)
	for len(src) > 0 {
		n := min(len(src), lz4Block)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n)|1<<31) // the high bit: stored
		dst = append(dst, src[:n]...)
		src = src[n:]
	}
	return binary.LittleEndian.AppendUint32(dst, 0) // end mark
}
