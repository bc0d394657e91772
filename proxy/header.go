package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

const (
	keyApiVersions        = int16(kmsg.ApiVersions)
	keyControlledShutdown = int16(kmsg.ControlledShutdown)
	maxKey                = 255 // kmsg's keys are dense and far below this
)

// reqHeader is a parsed request header.
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     []byte // aliases the frame
	nullClientID bool
	flexible     bool // the request (and so its response) uses flexible headers
	known        bool // kmsg knows this key and version
	bodyOff      int
}

var (
	errShortHeader = errors.New("request header truncated")
	errUnknownAPI  = errors.New("unknown api key or version")
)

// parseHeader reads the header at the start of frame (the bytes after the
// size). Only ApiVersions may have a version kmsg does not know: Kafka
// answers it with a v0 UNSUPPORTED_VERSION response, so its body is left
// unparsed (bodyOff = len(frame)).
func parseHeader(frame []byte, flex kwire.FlexTable) (reqHeader, error) {
	var h reqHeader
	if len(frame) < 8 {
		return h, fmt.Errorf("%d-byte frame: %w", len(frame), errShortHeader)
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	h.flexible, h.known = flex.Lookup(h.key, h.version)
	if !h.known {
		if h.key == keyApiVersions {
			h.bodyOff = len(frame)
			return h, nil
		}
		return h, fmt.Errorf("key %d version %d: %w", h.key, h.version, errUnknownAPI)
	}
	off := 8
	if h.key == keyControlledShutdown && h.version == 0 { // header v0: no client id
		h.nullClientID, h.bodyOff = true, off
		return h, nil
	}
	if len(frame) < off+2 {
		return h, fmt.Errorf("client id length: %w", errShortHeader)
	}
	n := int(int16(binary.BigEndian.Uint16(frame[off:])))
	off += 2
	switch {
	case n == -1:
		h.nullClientID = true
	case n < -1 || len(frame) < off+n:
		return h, fmt.Errorf("client id of %d bytes: %w", n, errShortHeader)
	default:
		h.clientID = frame[off : off+n]
		off += n
	}
	if h.flexible {
		k, err := skipTags(frame[off:])
		if err != nil {
			return h, fmt.Errorf("header tags: %w", err)
		}
		off += k
	}
	h.bodyOff = off
	return h, nil
}

var errBadTags = errors.New("malformed tagged fields")

// skipTags returns the length of the tagged-field section at the start of b.
func skipTags(b []byte) (int, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, errBadTags
	}
	off := w
	for i := uint64(0); i < n; i++ {
		if _, w = binary.Uvarint(b[off:]); w <= 0 {
			return 0, errBadTags
		}
		off += w
		size, w := binary.Uvarint(b[off:])
		if w <= 0 || uint64(len(b)-off-w) < size {
			return 0, errBadTags
		}
		off += w + int(size)
	}
	return off, nil
}

// responseHeader builds the size and header of a response with body
// bodyLen bytes long. ApiVersions responses always use header v0, so that a
// client that sent a version the proxy does not know can still read them.
func responseHeader(h *reqHeader, bodyLen int) response {
	var r response
	hlen := 8
	flexible := h.flexible && h.key != keyApiVersions
	if flexible {
		hlen = 9
	}
	binary.BigEndian.PutUint32(r.hdr[:], uint32(hlen-4+bodyLen))
	binary.BigEndian.PutUint32(r.hdr[4:], uint32(h.corr))
	r.hlen = uint8(hlen)
	return r
}
