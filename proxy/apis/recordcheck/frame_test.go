// This file gives the tests Produce request frames, as a connection reads
// them, observed by an Arrival in random pieces.

package recordcheck

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/crc32c"
)

// produceFrame is the frame (api key to the end, without the size) of a
// Produce at version whose topics have the given partitions' records, as
// kmsg writes it, and each partition's records as they lie in the frame
// (nil for nil). tagged gives every partition and topic a tagged field
// (flexible versions only).
func produceFrame(t testing.TB, version int16, topics [][][]byte, tagged bool) ([]byte, [][][]byte) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, -1, 1000
	for ti, parts := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "topic-"+string(rune('a'+ti)), [16]byte{byte(ti + 1)}
		for pi, records := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = int32(pi), records
			if tagged && version >= 9 {
				rp.UnknownTags.Set(uint32(7+pi), []byte("partition tag"))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if tagged && version >= 9 {
			rt.UnknownTags.Set(3, make([]byte, 130)) // a two-byte size
		}
		req.Topics = append(req.Topics, rt)
	}
	id := "client-of-the-test"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id)).AppendRequest(nil, req, 42)[4:]
	head := 10 + len(id)
	if version >= 9 {
		head++ // the header's empty tagged fields
	}
	got := kmsg.NewPtrProduceRequest()
	got.Version = version
	if err := got.UnsafeReadFrom(frame[head:]); err != nil {
		t.Fatalf("the test's own Produce v%d does not read back: %v", version, err)
	}
	in := make([][][]byte, len(got.Topics))
	for ti, rt := range got.Topics {
		for _, rp := range rt.Partitions {
			in[ti] = append(in[ti], rp.Records)
		}
	}
	return frame, in
}

// observed is an Arrival of frame read in random pieces (one byte up to
// three Blocks), bound to it.
func observed(frame []byte, seed uint64) *Arrival {
	rng := rand.New(rand.NewPCG(seed, 2))
	a := new(Arrival)
	a.Reset()
	for have := 0; have < len(frame); {
		k := min(len(frame)-have, 1+rng.IntN(3*crc32c.Block))
		if rng.IntN(8) == 0 {
			k = min(len(frame)-have, 1+rng.IntN(3))
		}
		have += k
		a.Observe(frame[:have], k)
	}
	a.Bind(frame)
	return a
}
