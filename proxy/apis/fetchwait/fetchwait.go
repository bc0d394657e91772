// Package fetchwait decides the MaxWait of a Fetch sub-request to a broker
// that waits per partition (apis.Config.PerPartitionFetchWait), as
// KafScale's brokers do.
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
// The promise, for each sub-request such a broker gets:
//   - when the client asks for at least one byte (MinBytes <= 1, every
//     client of the matrix) and some partition of the sub-request is known
//     to have records at its fetch offset, MaxWait 0: the broker answers at
//     once with what it holds, which satisfies MinBytes;
//   - otherwise what is left of the client's MaxWait divided among the
//     sub-request's partitions, so that the broker's waits, one after the
//     other, end within the client's MaxWait as Kafka's one wait does (at
//     least 1 ms each, so a drained fetch never turns into a busy loop; a
//     request with more partitions than milliseconds of MaxWait may take up
//     to one millisecond per partition).
//
// Its limit: a partition that gets data while the broker waits on another
// is seen when the broker reaches it or at the next fetch, so an idle
// consumer learns of new records within its MaxWait, not as soon as they
// are written; MinBytes above one byte is left to the broker. What "known
// to have records" means is the caller's (package apis: the fetch offset
// is below the highest high watermark the proxy passed on, hwfloor).
package fetchwait

// SubWait is the MaxWait, in milliseconds, of a sub-request of parts
// partitions to a broker that waits per partition, with remaining
// milliseconds left of the client's MaxWait; knownData says a partition of
// it has records at its fetch offset.
func SubWait(remaining, minBytes int32, parts int, knownData bool) int32 {
	if remaining <= 0 || parts <= 0 {
		return max(remaining, 0)
	}
	if minBytes <= 1 && knownData {
		return 0
	}
	return max(1, remaining/int32(parts))
}
