package split

// Sending each item of a request alone (Request.PerItem), for brokers that
// work the partitions of one request one after another.

import (
	"context"
	"encoding/binary"
	"hash/fnv"
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
	h := fnv.New64a()
	h.Write([]byte(k.Topic))
	h.Write(k.ID[:])
	var p [12]byte
	binary.BigEndian.PutUint32(p[:4], uint32(k.Part))
	binary.BigEndian.PutUint64(p[4:], conn)
	h.Write(p[:])
	return h.Sum64()
}
