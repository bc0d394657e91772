package apis

import (
	"bytes"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A merged fetch answer is mostly record batches, which arrive in the
// brokers' answer frames. Copying them into one merged body costs as much
// CPU as reading them did, so the answer goes out in pieces instead: kmsg
// encodes everything but the large record sets (the skeleton), and the
// pieces interleave the skeleton with the record sets left where they are.
//
// kmsg encodes the response in one go, so each left-out record set is
// replaced by a marker of markerLen bytes whose position in the skeleton
// shows where its length prefix and bytes go. Markers start with bytes
// random to this process (a client cannot forge one inside record data
// that stays inline) and end with the partition's number in the answer.

// vecMinBytes is the smallest record set left in its broker's frame: a
// smaller one costs more as an extra write vector than to copy.
const vecMinBytes = 4 << 10

const markerLen = 16

// vecEncoder encodes fetch answers in pieces; its buffers are reused.
type vecEncoder struct {
	secret  [markerLen - 4]byte
	markers []byte                              // markerLen bytes per left-out record set
	records [][]byte                            // the left-out record sets, in encoding order
	parts   []*kmsg.FetchResponseTopicPartition // whose record sets they are
}

// encode appends resp's skeleton to dst and returns it with the pieces of
// the answer, which start after dst's bytes (nil when no record set is
// large enough to leave out: skel is then the whole body). resp's large
// record sets are swapped for markers while kmsg encodes, then put back.
// ok is false if a marker is not where the encoding must put it, which a
// test rules out for every version; the caller then encodes resp whole.
func (e *vecEncoder) encode(resp *kmsg.FetchResponse, dst []byte) (skel []byte, parts [][]byte, ok bool) {
	clear(e.records) // drop references to earlier answers
	e.markers, e.records = e.markers[:0], e.records[:0]
	e.leaveOut(resp)
	skel = resp.AppendTo(dst)
	e.putBack()
	if len(e.records) == 0 {
		return skel, nil, true
	}
	parts = make([][]byte, 0, 3*len(e.records)+1)
	prefixes := make([]byte, 0, 5*len(e.records)) // never regrown: parts alias it
	flexible := resp.IsFlexible()
	markerPrefix := appendRecordsLen(nil, flexible, markerLen)
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

// leaveOut swaps resp's large record sets for markers, remembering them.
func (e *vecEncoder) leaveOut(resp *kmsg.FetchResponse) {
	for ti := range resp.Topics {
		ps := resp.Topics[ti].Partitions
		for pi := range ps {
			if p := &ps[pi]; len(p.RecordBatches) >= vecMinBytes {
				e.markers = append(e.markers, e.secret[:]...)
				e.markers = binary.BigEndian.AppendUint32(e.markers, uint32(len(e.records)))
				e.records = append(e.records, p.RecordBatches)
				e.parts = append(e.parts, p)
			}
		}
	}
	for i, p := range e.parts { // markers no longer grows: slice it now
		p.RecordBatches = e.markers[i*markerLen : (i+1)*markerLen : (i+1)*markerLen]
	}
}

// putBack restores the record sets leaveOut took.
func (e *vecEncoder) putBack() {
	for i, p := range e.parts {
		p.RecordBatches = e.records[i]
	}
	clear(e.parts)
	e.parts = e.parts[:0]
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
