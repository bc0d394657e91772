package apis

import (
	"bytes"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Most of a produce request or a fetch answer is record sets, which the
// proxy already holds in a frame: the client's request frame (produce) or
// the brokers' answer frames (fetch). Copying them into the message it
// sends on costs as much CPU as reading them did, so the message goes out
// in pieces instead: kmsg encodes everything but the large record sets
// (the skeleton), and the pieces interleave the skeleton with the record
// sets left where they are, for one vectored write.
//
// kmsg encodes a message in one go, so each left-out record set is
// replaced by a marker of markerLen bytes whose position in the skeleton
// shows where its length prefix and bytes go. Markers start with bytes
// random to this process (a client cannot forge one inside record data
// that stays inline) and end with the record set's number in the message.
//
// The pieces alias the frames the record sets are in: whoever sends them
// keeps those frames until the write is done (fetch: Reply.Release;
// produce: upstream.Lender, which the split engine reclaims before Finish
// returns).

// vecMinBytes is the smallest record set left in its frame: a smaller one
// costs more as an extra write vector than to copy.
const vecMinBytes = 4 << 10

const markerLen = 16

// vecEncoder encodes messages in pieces; its buffers are reused. Call
// leaveOut for each record set field, then encode.
type vecEncoder struct {
	secret  [markerLen - 4]byte
	markers []byte    // markerLen bytes per left-out record set
	records [][]byte  // the left-out record sets, in encoding order
	fields  []*[]byte // whose record sets they are
}

// encodable is a kmsg request or response.
type encodable interface {
	AppendTo([]byte) []byte
	IsFlexible() bool
}

// leaveOut has the next encode leave *field (a RECORDS field of the
// message) out of the skeleton, if it is large enough.
func (e *vecEncoder) leaveOut(field *[]byte) {
	if len(*field) < vecMinBytes {
		return
	}
	e.markers = append(e.markers, e.secret[:]...)
	e.markers = binary.BigEndian.AppendUint32(e.markers, uint32(len(e.records)))
	e.records = append(e.records, *field)
	e.fields = append(e.fields, field)
}

// encode appends msg's skeleton to dst and returns it with the pieces of
// the message, which start after dst's bytes (nil when no record set was
// left out: skel is then the whole message). The left-out fields hold
// markers while kmsg encodes, then their record sets again. ok is false if
// a marker is not where the encoding must put it, which a test rules out
// for every version; the caller then encodes msg whole.
func (e *vecEncoder) encode(msg encodable, dst []byte) (skel []byte, parts [][]byte, ok bool) {
	defer e.reset()
	for i, f := range e.fields { // markers no longer grows: slice it now
		*f = e.markers[i*markerLen : (i+1)*markerLen : (i+1)*markerLen]
	}
	skel = msg.AppendTo(dst)
	for i, f := range e.fields {
		*f = e.records[i]
	}
	if len(e.records) == 0 {
		return skel, nil, true
	}
	parts = make([][]byte, 0, 3*len(e.records)+1)
	prefixes := make([]byte, 0, 5*len(e.records)) // never regrown: parts alias it
	flexible := msg.IsFlexible()
	var mp [5]byte
	markerPrefix := appendRecordsLen(mp[:0], flexible, markerLen)
	pos := len(dst)
	for i, recs := range e.records {
		m := e.markers[i*markerLen : (i+1)*markerLen]
		at := bytes.Index(skel[pos:], m)
		if at < 0 {
			return skel, nil, false
		}
		at += pos
		start := at - len(markerPrefix)
		if start < pos || !bytes.Equal(skel[start:at], markerPrefix) {
			return skel, nil, false
		}
		n := len(prefixes)
		prefixes = appendRecordsLen(prefixes, flexible, len(recs))
		parts = append(parts, skel[pos:start], prefixes[n:], recs)
		pos = at + markerLen
	}
	return skel, append(parts, skel[pos:]), true
}

// reset forgets the fields and record sets of the last encode.
func (e *vecEncoder) reset() {
	clear(e.records) // drop references to the frames
	clear(e.fields)
	e.markers, e.records, e.fields = e.markers[:0], e.records[:0], e.fields[:0]
}

// encodeFetch encodes a fetch answer, leaving its large record sets in
// the brokers' frames.
func (e *vecEncoder) encodeFetch(resp *kmsg.FetchResponse, dst []byte) (skel []byte, parts [][]byte, ok bool) {
	for ti := range resp.Topics {
		ps := resp.Topics[ti].Partitions
		for pi := range ps {
			e.leaveOut(&ps[pi].RecordBatches)
		}
	}
	return e.encode(resp, dst)
}

// appendRecordsLen appends the length prefix of a record set of n bytes:
// Kafka's RECORDS type is nullable bytes, an int32 length before flexible
// versions and an unsigned varint of length+1 (compact) from them on.
func appendRecordsLen(dst []byte, flexible bool, n int) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
