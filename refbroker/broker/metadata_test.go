package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetadata(t *testing.T) {
	c := newCluster(t)
	b1 := c.start(1, func(cfg *Config) { cfg.DefaultPartitions = 2 })
	b2 := c.start(2, func(cfg *Config) { cfg.AutoCreateTopics, cfg.Rack = false, "zone-b" })
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	ctx := testCtx(t, 30*time.Second)
	meta := func(b *testBroker, version int16, auto bool, topics ...string) *kmsg.MetadataResponse {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = auto
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		rc := dialRaw(t, b.Addr())
		rc.send(req, version, 1)
		_, body, err := rc.recv()
		if err != nil {
			t.Fatalf("metadata v%d: %v", version, err)
		}
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = version
		if version >= 9 {
			body = body[1:] // response header tags
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("decode metadata v%d: %v", version, err)
		}
		return resp
	}
	// Brokers learn of each other through their etcd watch: wait (bounded)
	// until b1 lists both before checking its answers.
	for i := 0; len(meta(b1, 12, false).Brokers) < 2; i++ {
		if i == 200 {
			t.Fatalf("broker 1 does not list broker 2 after %d tries", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Auto-creation through the broker that allows it.
	resp := meta(b1, 12, true, "auto")
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("auto-create: %+v", resp.Topics)
	}
	if len(resp.Brokers) != 2 || resp.ClusterID == nil {
		t.Fatalf("brokers %+v cluster %v", resp.Brokers, resp.ClusterID)
	}
	// Broker 2's rack came to broker 1 through its etcd record.
	for _, br := range resp.Brokers {
		want := map[int32]string{1: "", 2: "zone-b"}[br.NodeID]
		got := ""
		if br.Rack != nil {
			got = *br.Rack
		}
		if got != want {
			t.Errorf("broker %d rack %q, want %q", br.NodeID, got, want)
		}
	}
	id := resp.Topics[0].TopicID
	// The other broker knows it too, by name and by id, in every version.
	for v := int16(0); v <= 13; v++ {
		r := meta(b2, v, false, "auto")
		if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: %+v", v, r.Topics)
		}
		for _, p := range r.Topics[0].Partitions {
			if p.Leader != 1 && p.Leader != 2 {
				t.Fatalf("v%d: partition %d leader %d", v, p.Partition, p.Leader)
			}
		}
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}}
	byID, err := req.RequestWith(ctx, direct(cl, b2))
	if err != nil || byID.Topics[0].ErrorCode != 0 || *byID.Topics[0].Topic != "auto" {
		t.Fatalf("by id: %v %+v", err, byID)
	}
	// No auto-creation where it is disabled, or when the request does not ask.
	for _, tc := range []struct {
		b    *testBroker
		auto bool
	}{{b2, true}, {b1, false}} {
		r := meta(tc.b, 12, tc.auto, "missing")
		if r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("broker %d auto %v: %v", tc.b.ID(), tc.auto, kerr.ErrorForCode(r.Topics[0].ErrorCode))
		}
	}
	if r := meta(b1, 12, true, "bad/name"); r.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	// All topics: null list (v1+).
	if r := meta(b2, 12, false); len(r.Topics) != 1 {
		t.Fatalf("all topics: %+v", r.Topics)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, direct(cl, b1))
	if err != nil || len(dcr.Brokers) != 2 || dcr.ControllerID != 1 {
		t.Fatalf("describe cluster: %v %+v", err, dcr)
	}
}
