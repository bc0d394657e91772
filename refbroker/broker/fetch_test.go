package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/testkit/faultnet"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

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

// startBehindRelay starts broker id with its etcd traffic through a relay
// the test can delay: a late watch on purpose.
func (c *cluster) startBehindRelay(id int32) (*testBroker, *faultnet.Relay) {
	c.t.Helper()
	relay, err := faultnet.NewRelay("127.0.0.1:0", strings.TrimPrefix(c.endpoint, "http://"), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { relay.Close() })
	b := c.start(id, func(cfg *Config) { cfg.Etcd = etcdtest.NewClient(c.t, "http://"+relay.Addr()) })
	return b, relay
}

// TestJustCreatedTopicKnownEverywhere: a broker whose metadata view has not
// yet seen a topic created through another broker confirms with etcd before
// answering UNKNOWN_TOPIC_OR_PARTITION, so a produce, a ListOffsets (a
// consumer's first request) or an OffsetForLeaderEpoch right after the
// creation succeeds. Broker 2's etcd traffic is delayed, so its watch is
// late on purpose.
func TestJustCreatedTopicKnownEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		// req is the request for partition 0 of topic; code reads that
		// partition's code from its response.
		req  func(topic string) kmsg.Request
		code func(kmsg.Response) int16
	}{
		{"produce", func(topic string) kmsg.Request {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = oneRecord("x")
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }},
		{"list-offsets", func(topic string) kmsg.Request {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -2 // earliest
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }},
		{"offset-for-leader-epoch", func(topic string) kmsg.Request {
			req := kmsg.NewPtrOffsetForLeaderEpochRequest()
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}, func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A cluster of its own: the relay's delays add up over a
			// long-lived watch stream.
			c := newCluster(t)
			b1 := c.start(1, nil)
			b2, relay := c.startBehindRelay(2)
			// Produce v9 names topics (v13 uses ids, which only the view maps).
			cl := c.clientFor([]string{b1.Addr(), b2.Addr()}, kgo.MaxVersions(kversion.V2_8_0()))
			ctx := testCtx(t, 60*time.Second)
			if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, direct(cl, b2)); err != nil {
				t.Fatal(err) // connected before the delay
			}
			relay.Delay(500 * time.Millisecond)
			topic := "fresh-" + tc.name
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, -1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, direct(cl, b1))
			if err != nil || resp.Topics[0].ErrorCode != 0 {
				t.Fatalf("create through broker 1: %v %v", err, resp)
			}
			// Straight to broker 2 by name, with no metadata request first
			// (a metadata request there would itself wait for the topic).
			r, err := direct(cl, b2).Request(ctx, tc.req(topic))
			if err != nil {
				t.Fatal(err)
			}
			if code := tc.code(r); code == kerr.UnknownTopicOrPartition.Code {
				t.Fatal("broker 2 answered UNKNOWN_TOPIC_OR_PARTITION for a topic etcd already had")
			}
		})
	}
}
