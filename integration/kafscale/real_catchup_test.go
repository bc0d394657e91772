package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/testkit/kafscalerig"
)

// catchUpTopic is a topic whose four partitions broker 0 leads: partition
// 0 holds segments separate segments of perSegment records (each acks=all
// produce is flushed as its own segment), the others one record each.
func (e *realEnv) catchUpTopic(ctx context.Context, topic string, segments, perSegment int) {
	e.t.Helper()
	direct, err := kgo.NewClient(append(kafscalerig.DirectOpts(e.rig.Broker(0).Addr),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer direct.Close()
	for p := int32(1); p < 4; p++ {
		if err := direct.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			e.t.Fatalf("produce to %s/%d at broker 0: %v", topic, p, err)
		}
	}
	for s := range segments {
		var recs []*kgo.Record
		for i := range perSegment {
			recs = append(recs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "s%d-%d", s, i)})
		}
		if err := direct.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			e.t.Fatalf("produce segment %d to %s/0 at broker 0: %v", s, topic, err)
		}
	}
	for p, o := range e.leases(ctx, topic) {
		if o != 0 {
			e.t.Fatalf("%s/%d leased by broker %d, want 0", topic, p, o)
		}
	}
}

// TestRealCatchUpOverDrainedPartitions: a kgo consumer (MaxWait 5 s, its
// default) reads through kproxy four partitions of one real KafScale
// broker; partition 0 has four segments, the others one record each, so
// after the first fetch three partitions are drained. KafScale's broker
// answers one segment per partition per fetch and waits MaxWait for each
// drained partition before answering, so without kproxy's help every
// segment after the first costs 3 x 5 s. Through kproxy the last record
// must come within 1 s of the first.
func TestRealCatchUpOverDrainedPartitions(t *testing.T) {
	const topic, segments, perSegment = "real-catchup", 4, 50
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.catchUpTopic(ctx, topic, segments, perSegment)

	cl := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := segments*perSegment + 3
	got := 0
	var first time.Time
	for got < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n := fs.NumRecords()
		if n > 0 && first.IsZero() {
			first = time.Now()
		}
		got += n
	}
	if got < want {
		t.Fatalf("read %d of %d records within 2 minutes", got, want)
	}
	const bound = time.Second
	took := time.Since(first)
	t.Logf("the last of %d records came %v after the first", want, took.Round(time.Millisecond))
	if took > bound {
		t.Fatalf("catch-up over 3 drained partitions: the last of %d records came %v after the first, want within %v (KafScale waits MaxWait per drained partition)", want, took.Round(time.Millisecond), bound)
	}
}

// TestRealDrainedFetchWithinMaxWait: a fetch through kproxy of four
// drained partitions of one real KafScale broker is answered within its
// MaxWait, as Kafka answers, not after MaxWait once per partition, as
// KafScale's broker waits.
func TestRealDrainedFetchWithinMaxWait(t *testing.T) {
	const topic = "real-drained"
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e.catchUpTopic(ctx, topic, 1, 1)
	cl := e.client()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 1000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, kafscalerig.TopicID(topic) // by name or id: kgo picks the version
	for p := range int32(4) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 1, 1<<20 // every partition holds one record
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("fetch through kproxy: %v", err)
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
				t.Fatalf("%s/%d: error %d, %d record bytes; want a drained partition", tp.Topic, p.Partition, p.ErrorCode, len(p.RecordBatches))
			}
		}
	}
	t.Logf("a fetch of 4 drained partitions at MaxWait 1 s took %v", took.Round(time.Millisecond))
	const slack = 700 * time.Millisecond
	if took > time.Second+slack {
		t.Fatalf("a fetch of 4 drained partitions at MaxWait 1 s took %v through kproxy, want at most MaxWait (+%v)", took.Round(time.Millisecond), slack)
	}
}
