package proxy

import (
	"encoding/binary"
	"errors"

	"github.com/kproxy/kproxy/internal/kwire"
)

// maxKey bounds per-API tables; kmsg's keys are dense and far below it.
const maxKey = 255

// reqHeader is a request's header as kwire parses it, and whether the frame
// was a raw SASL token (after SaslHandshake v0), whose response has no header.
type reqHeader struct {
	kwire.RequestHeader
	raw bool
}

// responseHeader builds the size and header of a response with body
// bodyLen bytes long.
func responseHeader(h *reqHeader, bodyLen int) response {
	var r response
	if h.raw { // a raw SASL token's answer: only its size
		binary.BigEndian.PutUint32(r.hdr[:], uint32(bodyLen))
		r.hlen = 4
		return r
	}
	r.hlen = uint8(kwire.PutResponseHeader(&r.hdr, h.Corr, kwire.ResponseHeaderFlexible(h.Key, h.Flexible), bodyLen))
	return r
}

// headerReason is the kproxy_bad_input_total reason of a kwire.ParseRequestHeader error.
func headerReason(err error) string {
	if errors.Is(err, kwire.ErrUnknownAPI) {
		return badUnknownAPI
	}
	return badHeader
}
