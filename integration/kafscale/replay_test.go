package kafscale

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTakeoverReplay is KafScale's takeover hazard, proxy side: a consumer
// reads a partition before anyone leases it, then a producer writes to it.
// KafScale's broker that served the reads keeps a view of the partition;
// if another broker then took the lease and the reads moved, offsets could
// be handed out twice. Through kproxy every read and the write must reach
// one broker, the one that takes the lease.
func TestTakeoverReplay(t *testing.T) {
	const topic = "replay"
	e := newEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const p = int32(2)
	if o := e.owner(ctx, topic, p); o >= 0 {
		t.Fatalf("%s/%d is leased by %d before any produce", topic, p, o)
	}

	// Reads first: list offsets and a consumer polling the empty partition.
	consumer := e.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = p, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if resp, err := lo.RequestWith(ctx, consumer); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets through the proxy: %+v, %v", resp, err)
	}
	pollCtx, stopPoll := context.WithTimeout(ctx, 600*time.Millisecond)
	consumer.PollFetches(pollCtx) // long polls of the empty partition
	stopPoll()
	reads := e.servedFor(topic, p)
	if len(reads) == 0 {
		t.Fatal("no read of the unowned partition reached a broker")
	}

	// Then the first write.
	producer := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte("first")}
	if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fs := pollUntil(ctx, t, consumer, 1)
	if len(fs) != 1 || string(fs[0].Value) != "first" || fs[0].Offset != rec.Offset {
		t.Fatalf("read back %+v, want the record at offset %d", fs, rec.Offset)
	}

	owner := e.owner(ctx, topic, p)
	all := e.servedFor(topic, p)
	var produces int
	for _, s := range all {
		if s.node != owner {
			t.Errorf("%s to broker %d, but broker %d took the lease: %+v", kmsg.NameForKey(s.key), s.node, owner, all)
		}
		if s.key == int16(kmsg.Produce) {
			produces++
		}
	}
	if owner < 0 || produces == 0 {
		t.Fatalf("after the produce: owner %d, %d produce requests seen: %+v", owner, produces, all)
	}
	t.Logf("%d requests for %s/%d, every one at broker %d", len(all), topic, p, owner)
}

func (e *env) servedFor(topic string, p int32) []served {
	var out []served
	for _, s := range e.servedLog() {
		if s.topic == topic && s.part == p {
			out = append(out, s)
		}
	}
	return out
}

// pollUntil polls until n records arrived; client-visible fetch errors
// fail the test.
func pollUntil(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records before timeout", len(got), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch error on %s/%d: %v", topic, p, err)
		})
		got = append(got, fs.Records()...)
	}
	return got
}
