package apis

// This file answers a Produce that lists one partition more than once as
// Kafka does: KafkaApis collects the partitions of a request in a map, so
// the last listing's records are appended, once, and the answer names the
// partition once. The earlier listings are neither forwarded nor answered.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dupQuadratic is the most items compared pairwise; larger requests use a
// map (built only when a request is that large).
const dupQuadratic = 32

type dupKey struct {
	topic string
	id    [16]byte
	part  int32
}

// markDuplicates sets o.dropped[i] for every item listed again later in
// the request and returns how many there are.
func (o *produceOp) markDuplicates() int {
	n := len(o.answers)
	if n < 2 {
		return 0
	}
	o.dropped = slices.Grow(o.dropped[:0], n)[:n]
	clear(o.dropped)
	keys := o.dupKeys[:0]
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			k := dupKey{part: t.Partitions[pi].Partition}
			if o.byID {
				k.id = t.TopicID
			} else {
				k.topic = t.Topic
			}
			keys = append(keys, k)
		}
	}
	o.dupKeys = keys
	dups := 0
	if n <= dupQuadratic {
		for i := range keys {
			for j := i + 1; j < n; j++ {
				if keys[i] == keys[j] {
					o.dropped[i] = true
					dups++
					break
				}
			}
		}
		return dups
	}
	last := make(map[dupKey]int, n)
	for i, k := range keys {
		last[k] = i
	}
	for i, k := range keys {
		if last[k] != i {
			o.dropped[i] = true
			dups++
		}
	}
	return dups
}

// keptTopics is the answer's topics without the dropped listings (and
// without a topic that has none left); o.kept holds their partitions.
func (o *produceOp) keptTopics(dst []kmsg.ProduceResponseTopic) []kmsg.ProduceResponseTopic {
	o.kept = append(o.kept[:0], o.answers...)[:0]
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		start := len(o.kept)
		for i := o.tstart[ti]; i < o.tstart[ti+1]; i++ {
			if !o.dropped[i] {
				o.kept = append(o.kept, o.answers[i])
			}
		}
		if len(o.kept) > start {
			dst = append(dst, kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: o.kept[start:len(o.kept):len(o.kept)]})
		}
	}
	return dst
}
