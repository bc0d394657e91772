package apis

import "github.com/twmb/franz-go/pkg/kmsg"

// fetchwait.go shapes the MaxWait of Fetch sub-requests to brokers that
// wait per partition (Config.PerPartitionFetchWait).
//
// Why: KafScale's broker answers a fetch partition by partition, one
// segment each, and for every drained partition (fetch offset at its end)
// it waits up to MaxWait before it looks at the next; it ignores MinBytes.
// A sub-request with one partition holding data and n drained ones comes
// back after n x MaxWait, and a consumer catching up on a partition with
// many segments gets one segment per such wait (20 s for two segments
// behind four partitions at kgo's 5 s MaxWait; past kgo's request timeout
// the fetch is even abandoned and sent again).
//
// What the proxy does, for each sub-request it sends such a broker:
//   - when the client asks for at least one byte (MinBytes <= 1, every
//     client of the matrix) and some partition of the sub-request is known
//     to have data, MaxWait 0: the broker answers at once with what it
//     holds, which satisfies MinBytes. A partition is known to have data
//     when its fetch offset is below the highest high watermark the proxy
//     has passed on for it (hwfloor): those records are committed and
//     KafScale's watermarks never go down.
//   - otherwise what is left of the client's MaxWait, divided among the
//     sub-request's partitions, so that the broker's waits one after the
//     other end within the client's MaxWait, as Kafka's one wait does
//     (at least 1 ms each, so a drained fetch never turns into a busy
//     loop; a request with more partitions than milliseconds of MaxWait
//     may take up to one millisecond per partition).
//
// Limits: a partition that gets data while the broker waits on another is
// seen only when the broker reaches it or at the next fetch, so on such
// brokers an idle consumer learns of new records within its MaxWait, not
// as soon as they are written. MinBytes above one byte is left to the
// broker (KafScale answers with whatever it read).

// subWait is the MaxWait of the sub-request for items idx.
func (o *fetchOp) subWait(idx []int32) int32 {
	w := o.maxWait()
	if !o.d.cfg.PerPartitionFetchWait || w <= 0 || len(idx) == 0 {
		return w
	}
	if o.req.MinBytes <= 1 && o.knownData(idx) {
		return 0
	}
	return max(1, w/int32(len(idx)))
}

// knownData says whether a partition of items idx is known to hold records
// at its fetch offset.
func (o *fetchOp) knownData(idx []int32) bool {
	for _, i := range idx {
		k := o.s.KeyOf(i)
		p := &o.req.Topics[k.TI].Partitions[k.PI]
		if o.d.floors.Floor(k.ID, k.Part) > p.FetchOffset {
			return true
		}
	}
	return false
}

// noteWatermark records the high watermark a broker answered for item i,
// for knownData. Zone reads raise it in Absorb already.
func (o *fetchOp) noteWatermark(i int32, p *kmsg.FetchResponseTopicPartition) {
	if o.d.cfg.PerPartitionFetchWait && p.ErrorCode == 0 {
		k := o.s.KeyOf(i)
		o.d.floors.Raise(k.ID, k.Part, p.HighWatermark)
	}
}
