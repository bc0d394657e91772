package proxy

import (
	"encoding/binary"
	"errors"

	"github.com/kproxy/kproxy/internal/kwire"
)

// maxKey bounds per-API tables; kmsg's keys are dense and far below it.
const maxKey = 255

// reqHeader is a parsed request header (see kwire.RequestHeader).
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     []byte // aliases the frame
	nullClientID bool
	flexible     bool // the request (and so its response) uses flexible headers
	known        bool // kmsg knows this key and version
	raw          bool // a raw SASL token (after SaslHandshake v0): the response has no header
	bodyOff      int
}

var (
	errShortHeader = kwire.ErrShortHeader
	errUnknownAPI  = kwire.ErrUnknownAPI
	errBadTags     = kwire.ErrBadTags
)

// parseHeader reads the header at the start of frame (the bytes after the
// size); see kwire.ParseRequestHeader.
func parseHeader(frame []byte, flex kwire.FlexTable) (reqHeader, error) {
	k, err := kwire.ParseRequestHeader(frame, flex)
	return reqHeader{
		key: k.Key, version: k.Version, corr: k.Corr, clientID: k.ClientID, nullClientID: k.NullClientID,
		flexible: k.Flexible, known: k.Known, bodyOff: k.BodyOff,
	}, err
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
	r.hlen = uint8(kwire.PutResponseHeader(&r.hdr, h.corr, kwire.ResponseHeaderFlexible(h.key, h.flexible), bodyLen))
	return r
}

// headerReason is the kproxy_bad_input_total reason of a parseHeader error.
func headerReason(err error) string {
	if errors.Is(err, errUnknownAPI) {
		return badUnknownAPI
	}
	return badHeader
}
