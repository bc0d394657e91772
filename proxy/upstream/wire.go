package upstream

import (
	"encoding/binary"

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
