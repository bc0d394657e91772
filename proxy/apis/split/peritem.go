package split

// Sending each item of a request alone (Request.PerItem), for brokers that
// work the partitions of one request one after another.

import (
	"context"
	"encoding/binary"
)

// dispatchPerItem sends every idle (routed) item alone (Request.PerItem),
// retries too, so that an item's attempts keep its affinity. whole, the
// client's request, goes as it is when it is that one item.
func (s *Engine) dispatchPerItem(ctx context.Context, whole []byte) {
	n := 0
	for i := range s.items {
		if s.items[i].state == itemIdle {
			n++
		}
	}
	if n > 1 {
		whole = nil
	}
	for i := range s.items {
		it := &s.items[i]
		if it.state != itemIdle {
			continue
		}
		start := len(s.idx)
		s.idx = append(s.idx, int32(i))
		it.state = itemSent
		it.tries++
		s.send(ctx, it.broker, s.idx[start:len(s.idx):len(s.idx)], whole, n, itemAffinity(s.conn, &it.Key))
	}
}

// itemAffinity is the Sender affinity of an item of client connection
// conn sent alone: the same for every request of conn naming that topic and
// partition, so that they keep their order on one connection. Two items
// that collide share a connection, which only serializes them.
func itemAffinity(conn uint64, k *Key) uint64 {
	// FNV-1a, inline: hash.Hash would cost an allocation per item.
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(k.Topic); i++ {
		h = (h ^ uint64(k.Topic[i])) * prime
	}
	var tail [28]byte
	copy(tail[:16], k.ID[:])
	binary.BigEndian.PutUint32(tail[16:20], uint32(k.Part))
	binary.BigEndian.PutUint64(tail[20:], conn)
	for _, b := range tail {
		h = (h ^ uint64(b)) * prime
	}
	return h
}
