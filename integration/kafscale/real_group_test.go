package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRealConsumerGroup: a kgo group member joins through kproxy (the
// group's coordinator is whichever real broker takes its lease), consumes
// part of a topic, commits and leaves. A new client reads the group's
// committed offsets through kproxy (OffsetFetch) and resumes exactly there,
// reading the rest, records produced in between included.
//
// It resumes with OffsetFetch rather than by a second member joining the
// group: KafScale's coordinator answers every JoinGroup after the last
// member left with REBALANCE_IN_PROGRESS, for minutes, also when a client
// talks to the broker directly (see docs/kafscale.md).
func TestRealConsumerGroup(t *testing.T) {
	const topic, group = "real-group", "real-group-g"
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e.produceN(ctx, topic, 200)

	a := e.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	read := 0
	for read < 100 && ctx.Err() == nil {
		fs := a.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) { t.Logf("member: fetch %s/%d: %v", tp, p, err) })
		read += fs.NumRecords()
	}
	if err := a.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through kproxy: %v", err)
	}
	committed := map[int32]int64{}
	for p, o := range a.CommittedOffsets()[topic] {
		committed[p] = o.Offset
	}
	a.Close() // leaves the group
	if len(committed) == 0 {
		t.Fatalf("the member read %d records but committed no offsets", read)
	}

	after := map[string]bool{}
	producer := e.client(kgo.DefaultProduceTopic(topic))
	for i := range 100 {
		v := fmt.Sprintf("after-%d", i)
		after[v] = true
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}

	// Partitions named: KafScale answers a fetch of all the group's
	// offsets (Topics null, as kadm sends) with none, directly too.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0, 1, 2, 3}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, e.client())
	if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
		t.Fatalf("OffsetFetch of %s through kproxy: %+v, %v", group, resp, err)
	}
	resume := map[int32]kgo.Offset{}
	for _, p := range resp.Topics[0].Partitions {
		c, ok := committed[p.Partition]
		if ok && (p.ErrorCode != 0 || p.Offset != c) {
			t.Fatalf("partition %d: OffsetFetch through kproxy = offset %d error %d, the member committed %d", p.Partition, p.Offset, p.ErrorCode, c)
		}
		resume[p.Partition] = kgo.NewOffset().AtStart() // nothing read there yet
		if ok {
			resume[p.Partition] = kgo.NewOffset().At(p.Offset)
		}
	}
	b := e.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: resume}), kgo.FetchMaxWait(500*time.Millisecond))
	lowest := map[int32]int64{}
	for len(after) > 0 && ctx.Err() == nil {
		fs := b.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if lo, ok := lowest[r.Partition]; !ok || r.Offset < lo {
				lowest[r.Partition] = r.Offset
			}
			delete(after, string(r.Value))
		})
	}
	if len(after) > 0 {
		t.Fatalf("resumed at the committed offsets %v, %d records produced after the commit were not read", committed, len(after))
	}
	for p, lo := range lowest {
		if c, ok := committed[p]; ok && lo != c {
			t.Errorf("partition %d: resumed at offset %d, the member committed %d", p, lo, c)
		}
	}
}
