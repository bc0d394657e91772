package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A long poll on a broker that does not own the partition wakes when the
// owner's commit reaches it through the watch.
func TestLongPollWakesOnCommitElsewhere(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "poll", 1)
	ctx := testCtx(t, 30*time.Second)
	id := topicID(ctx, t, cl, "poll")

	type result struct {
		p    kmsg.FetchResponseTopicPartition
		took time.Duration
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 10000, 1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "poll", id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(ctx, direct(cl, b2))
		r := result{took: time.Since(start), err: err}
		if err == nil {
			r.p = resp.Topics[0].Partitions[0]
		}
		done <- r
	}()
	time.Sleep(300 * time.Millisecond) // let the fetch park (a late park only makes it return data at once)
	if rp := produceUntilLeader(ctx, t, direct(cl, b1), "poll", 0, oneRecord("wake")); rp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("fetch never returned")
	}
	if r.err != nil || r.p.ErrorCode != 0 {
		t.Fatalf("fetch: %v %v", r.err, kerr.ErrorForCode(r.p.ErrorCode))
	}
	if r.p.HighWatermark != 1 || len(r.p.RecordBatches) == 0 {
		t.Fatalf("fetch returned high watermark %d and %d bytes, want the record", r.p.HighWatermark, len(r.p.RecordBatches))
	}
	if r.took > 5*time.Second {
		t.Fatalf("long poll took %v: it was not woken by the commit", r.took)
	}
}

// Fetch, ListOffsets and OffsetForLeaderEpoch check the client's leader
// epoch against the partition's.
func TestLeaderEpochChecks(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "ep", 1)
	ctx := testCtx(t, 30*time.Second)
	for range 3 {
		if rp := produceUntilLeader(ctx, t, direct(cl, b), "ep", 0, oneRecord("x")); rp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	waitEpoch(ctx, t, b, "ep", 1)
	cases := []struct {
		epoch int32
		want  int16
	}{
		{-1, 0}, {0, kerr.FencedLeaderEpoch.Code}, {1, 0}, {2, kerr.UnknownLeaderEpoch.Code},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "ep"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = tc.epoch, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, direct(cl, b))
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != tc.want {
			t.Errorf("current epoch %d: %v, want %v", tc.epoch, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.want))
		}
		if got.ErrorCode == 0 && (got.LeaderEpoch != 1 || got.EndOffset != 3) {
			t.Errorf("current epoch %d: epoch %d end %d, want epoch 1 end 3", tc.epoch, got.LeaderEpoch, got.EndOffset)
		}
	}
}

// waitEpoch waits until the broker's meta view knows the partition's epoch.
func waitEpoch(ctx context.Context, t *testing.T, b *testBroker, topic string, epoch int32) {
	t.Helper()
	for b.meta.epoch(tpOf(topic, 0)) != epoch {
		select {
		case <-ctx.Done():
			t.Fatalf("epoch of %s/0 never reached %d", topic, epoch)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
