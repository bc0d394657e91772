package testrig

// ProduceRaw sends record bytes exactly as given, for tests of what the
// proxy or a broker does with hostile or hand-built batches.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceRaw sends one Produce (acks=all) to topic with recs[p] as the
// record data of partition p, and returns each partition's answer. The
// client's versions decide the request's; topics are named, so it needs a
// client capped below Produce v13.
func ProduceRaw(ctx context.Context, cl kmsg.Requestor, topic string, recs map[int32][]byte) (map[int32]kmsg.ProduceResponseTopicPartition, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p, r := range recs {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, r
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("produce to %s: %w", topic, err)
	}
	out := make(map[int32]kmsg.ProduceResponseTopicPartition, len(recs))
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p
		}
	}
	return out, nil
}
