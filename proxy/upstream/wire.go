package upstream

import (
	"encoding/binary"
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	keyProduce     = int16(kmsg.Produce)
	keyFetch       = int16(kmsg.Fetch)
	keyApiVersions = int16(kmsg.ApiVersions)
	keyJoinGroup   = int16(kmsg.JoinGroup)
	keySyncGroup   = int16(kmsg.SyncGroup)
)

// produceFields reads acks and the timeout of an encoded Produce request
// body. Kafka sends no response to acks=0, so the connection must not wait
// for one; the timeout extends how long a response may take.
func produceFields(version int16, body []byte) (acks int16, timeoutMillis int32, ok bool) {
	b := body
	if version >= 3 { // transactional id precedes acks
		if version >= 9 {
			n, w := binary.Uvarint(b)
			if w <= 0 {
				return 0, 0, false
			}
			b = b[w:]
			if n > 0 {
				if uint64(len(b)) < n-1 {
					return 0, 0, false
				}
				b = b[n-1:]
			}
		} else {
			if len(b) < 2 {
				return 0, 0, false
			}
			n := int16(binary.BigEndian.Uint16(b))
			b = b[2:]
			if n > 0 {
				if len(b) < int(n) {
					return 0, 0, false
				}
				b = b[n:]
			}
		}
	}
	if len(b) < 6 {
		return 0, 0, false
	}
	return int16(binary.BigEndian.Uint16(b)), int32(binary.BigEndian.Uint32(b[2:])), true
}

// fetchMaxWait reads MaxWaitMillis of an encoded Fetch request body: a
// broker holds a fetch that long before answering.
func fetchMaxWait(version int16, body []byte) (int32, bool) {
	off := 4 // ReplicaID precedes it up to v14
	if version >= 15 {
		off = 0
	}
	if len(body) < off+4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(body[off:])), true
}

// joinGroupRebalanceTimeout reads how long a broker may hold an encoded
// JoinGroup request body: its rebalance timeout (v1+), or its session
// timeout in v0, which served as both.
func joinGroupRebalanceTimeout(version int16, body []byte) (int32, bool) {
	b, ok := skipString(body, version >= 6)
	if !ok {
		return 0, false
	}
	off := 0 // v0: the session timeout
	if version >= 1 {
		off = 4
	}
	if len(b) < off+4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b[off:])), true
}

// skipString returns b after the (compact, when flexible) string at its
// start.
func skipString(b []byte, compact bool) ([]byte, bool) {
	if compact {
		n, w := binary.Uvarint(b)
		if w <= 0 || n == 0 || uint64(len(b)-w) < n-1 {
			return nil, false
		}
		return b[w+int(n-1):], true
	}
	if len(b) < 2 {
		return nil, false
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	if n < 0 || len(b)-2 < n {
		return nil, false
	}
	return b[2+n:], true
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
		if _, w = binary.Uvarint(b[off:]); w <= 0 { // tag id
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

// appendRequestHeader appends a request header (v1, or v2 when flexible) with
// a placeholder size prefix; putSize fills it in once the body is appended.
func appendRequestHeader(dst []byte, key, version int16, corr int32, clientID string, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if flexible {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

func putSize(frame []byte) { binary.BigEndian.PutUint32(frame, uint32(len(frame)-4)) }

// corrOffset is where the correlation id sits in a request frame.
const corrOffset = 8
