package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceConsumeRoundTrip(t *testing.T) {
	c := newCluster(t)
	c.start(1, nil)
	cl := c.client(kgo.DefaultProduceTopic("rt"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c.createTopic(cl, "rt", 3)
	ctx := testCtx(t, 30*time.Second)
	const n = 300
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: recordValue(i), Partition: int32(i % 3)}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	recs := consumeN(t, c, "rt", n)
	seen := make(map[string]bool)
	next := map[int32]int64{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		seen[string(r.Value)] = true
	}
	for i := range n {
		if !seen[string(recordValue(i))] {
			t.Fatalf("record %d not consumed", i)
		}
	}
}
