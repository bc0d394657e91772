package apis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/routing"
)

func TestMetadataEveryVersion(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	vr := d.vers.current().get(int16(kmsg.Metadata))
	for v := vr.min; v <= vr.max; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := roundTrip(t, d, req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != proxyID || resp.Brokers[0].Host != "proxy.local" || resp.Brokers[0].Port != 9092 {
			t.Fatalf("v%d: brokers %+v, want only the proxy", v, resp.Brokers)
		}
		if v >= 1 && resp.ControllerID != proxyID {
			t.Fatalf("v%d: controller %d", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != "kproxy-test") {
			t.Fatalf("v%d: cluster id %v", v, resp.ClusterID)
		}
		if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "t" || *resp.Topics[1].Topic != "u" {
			t.Fatalf("v%d: topics %+v", v, resp.Topics)
		}
		for _, mt := range resp.Topics {
			checkTopicMetadata(t, v, mt)
		}
	}
	if n := len(f.requests(kmsg.Metadata)); n != 0 {
		t.Fatalf("Metadata reached brokers %d times", n)
	}
}

func checkTopicMetadata(t *testing.T, v int16, mt kmsg.MetadataResponseTopic) {
	t.Helper()
	name := *mt.Topic
	want := map[string]int{"t": 16, "u": 4}[name]
	if mt.ErrorCode != 0 || len(mt.Partitions) != want {
		t.Fatalf("v%d %s: error %d, %d partitions", v, name, mt.ErrorCode, len(mt.Partitions))
	}
	if v >= 10 && mt.TopicID != topicID(name) {
		t.Fatalf("v%d %s: topic id %x", v, name, mt.TopicID)
	}
	for i, p := range mt.Partitions {
		epoch := int32(-1)
		if name == "t" {
			epoch = 5
		}
		if p.Partition != int32(i) || p.Leader != proxyID || !slices.Equal(p.Replicas, []int32{proxyID}) || !slices.Equal(p.ISR, []int32{proxyID}) {
			t.Fatalf("v%d %s/%d: %+v", v, name, i, p)
		}
		if v >= 7 && p.LeaderEpoch != epoch {
			t.Fatalf("v%d %s/%d: leader epoch %d, want %d", v, name, i, p.LeaderEpoch, epoch)
		}
	}
}

func TestMetadataRequestedTopics(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	unknownID := topicID("zzz")
	req.Topics = []kmsg.MetadataRequestTopic{
		{Topic: kmsg.StringPtr("u")},
		{Topic: kmsg.StringPtr("nope")},
		{TopicID: topicID("t")},
		{TopicID: unknownID},
		{Topic: kmsg.StringPtr("bad/name")},
	}
	resp := roundTrip(t, d, req).(*kmsg.MetadataResponse)
	codes := []int16{0, kerr.UnknownTopicOrPartition.Code, 0, kerr.UnknownTopicID.Code, kerr.InvalidTopicException.Code}
	if len(resp.Topics) != len(codes) {
		t.Fatalf("%d topics answered", len(resp.Topics))
	}
	for i, c := range codes {
		if resp.Topics[i].ErrorCode != c {
			t.Fatalf("topic %d: code %d, want %d", i, resp.Topics[i].ErrorCode, c)
		}
	}
	if *resp.Topics[2].Topic != "t" || len(resp.Topics[2].Partitions) != 16 {
		t.Fatalf("lookup by id: %+v", resp.Topics[2])
	}
}

func metadataFor(v int16, allow bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = v, allow
	for _, n := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(n)})
	}
	return req
}

func TestMetadataAutoCreate(t *testing.T) {
	t.Run("created and visible", func(t *testing.T) {
		d, f, rt := newTestDispatcher(t, func(c *Config) { c.AutoCreateTopics, c.DefaultPartitions = true, 3 })
		req := metadataFor(9, true, "fresh")
		ctx := context.Background()
		c := d.Begin(ctx, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil))
		creates := f.requests(kmsg.CreateTopics)
		if len(creates) != 1 {
			t.Fatalf("%d CreateTopics sent, want 1", len(creates))
		}
		ct := creates[0].req.(*kmsg.CreateTopicsRequest)
		if ct.Topics[0].Topic != "fresh" || ct.Topics[0].NumPartitions != 3 {
			t.Fatalf("CreateTopics %+v", ct.Topics)
		}
		done := make(chan Reply, 1)
		go func() {
			r, err := c.Finish(ctx)
			if err != nil {
				t.Error(err)
			}
			done <- r
		}()
		rt.SetTopic(routing.Topic{Name: "fresh", ID: topicID("fresh"), Partitions: 3}) // the watch catches up
		select {
		case r := <-done:
			resp := decodeReply(t, req, replyBytes(r)).(*kmsg.MetadataResponse)
			if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
				t.Fatalf("created topic answered %+v", resp.Topics[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Metadata did not see the created topic")
		}
	})
	t.Run("not visible in time", func(t *testing.T) {
		d, _, _ := newTestDispatcher(t, func(c *Config) { c.AutoCreateTopics, c.AutoCreateWait = true, 20*time.Millisecond })
		resp := roundTrip(t, d, metadataFor(9, true, "slow")).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("code %d, want LEADER_NOT_AVAILABLE so the client retries", resp.Topics[0].ErrorCode)
		}
	})
	t.Run("request forbids it", func(t *testing.T) {
		d, f, _ := newTestDispatcher(t, func(c *Config) { c.AutoCreateTopics = true })
		resp := roundTrip(t, d, metadataFor(9, false, "no")).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || len(f.requests(kmsg.CreateTopics)) != 0 {
			t.Fatalf("code %d, creates %d", resp.Topics[0].ErrorCode, len(f.requests(kmsg.CreateTopics)))
		}
	})
	t.Run("disabled", func(t *testing.T) {
		d, f, _ := newTestDispatcher(t)
		resp := roundTrip(t, d, metadataFor(3, true, "no")).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || len(f.requests(kmsg.CreateTopics)) != 0 {
			t.Fatalf("code %d, creates %d", resp.Topics[0].ErrorCode, len(f.requests(kmsg.CreateTopics)))
		}
	})
	t.Run("broker refuses", func(t *testing.T) {
		d, f, _ := newTestDispatcher(t, func(c *Config) { c.AutoCreateTopics = true })
		for b := int32(1); b <= 3; b++ {
			f.on(b, kmsg.CreateTopics, func(_ int, req kmsg.Request) fakeReply {
				return fakeReply{resp: answer.ErrorResponse(req, kerr.PolicyViolation.Code)}
			})
		}
		resp := roundTrip(t, d, metadataFor(9, true, "denied")).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
			t.Fatalf("code %d, want the broker's POLICY_VIOLATION", resp.Topics[0].ErrorCode)
		}
	})
}

func TestFindCoordinatorEveryVersion(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	vr := d.vers.current().get(int16(kmsg.FindCoordinator))
	for v := vr.min; v <= vr.max; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g1", []string{"g1", "g2"}
		resp := roundTrip(t, d, req).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != proxyID || resp.Host != "proxy.local" || resp.Port != 9092 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Coordinators) != 2 {
			t.Fatalf("v%d: %d coordinators", v, len(resp.Coordinators))
		}
		for i, c := range resp.Coordinators {
			if c.Key != req.CoordinatorKeys[i] || c.NodeID != proxyID || c.Host != "proxy.local" || c.ErrorCode != 0 {
				t.Fatalf("v%d: coordinator %+v", v, c)
			}
		}
	}
	if len(f.requests(kmsg.FindCoordinator)) != 0 {
		t.Fatal("FindCoordinator reached a broker")
	}
}

func TestDescribeClusterEveryVersion(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	vr := d.vers.current().get(int16(kmsg.DescribeCluster))
	for v := vr.min; v <= vr.max; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		resp := roundTrip(t, d, req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != "kproxy-test" || resp.ControllerID != proxyID ||
			len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != proxyID {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
}

// TestMetadataEpochNeverRewinds: a partition whose owner left (or whose
// owner is not live) reports its last known epoch, never the -1 sentinel:
// kgo keeps waiting for a leader on -1 and never produces again, and only a
// produce gets the partition acquired (issue 11). It used to report -1.
func TestMetadataEpochNeverRewinds(t *testing.T) {
	d, _, rt := newTestDispatcher(t)
	rt.DeleteOwner("t", 3)  // released: epoch key still says 5
	rt.SetOwner("t", 4, 42) // owned by a broker that is not live
	rt.SetEpoch("t", 4, 6)
	resp := roundTrip(t, d, metadataFor(12, false, "t")).(*kmsg.MetadataResponse)
	want := map[int32]int32{0: 5, 3: 5, 4: 6, 5: 5}
	for p, epoch := range want {
		if got := resp.Topics[0].Partitions[p].LeaderEpoch; got != epoch {
			t.Errorf("partition %d: leader epoch %d, want %d", p, got, epoch)
		}
	}
}

// TestMetadataByIDAuthorizedByName: Metadata v12 naming topics only by id
// is authorized by the names the ids resolve to. Without Describe the
// topic answers TOPIC_AUTHORIZATION_FAILED with its id and neither name
// nor partitions; a described one is answered in full; an unknown id
// answers UNKNOWN_TOPIC_ID.
func TestMetadataByIDAuthorizedByName(t *testing.T) {
	d, _, _ := newTestDispatcher(t, func(c *Config) {
		a := authz.New(authz.Config{Mode: authz.DenyByDefault})
		a.Update([]authz.Binding{{
			Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: "u"},
			Entry:   authz.Entry{Principal: authz.AnonymousUser, Host: "*", Operation: kmsg.ACLOperationDescribe, Permission: kmsg.ACLPermissionTypeAllow},
		}})
		c.Authorizer = a
	})
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: topicID("t")}, {TopicID: topicID("u")}, {TopicID: topicID("zzz")}}
	resp := roundTrip(t, d, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 3 {
		t.Fatalf("%d topics answered, want 3", len(resp.Topics))
	}
	denied, allowed, unknown := resp.Topics[0], resp.Topics[1], resp.Topics[2]
	if denied.ErrorCode != kerr.TopicAuthorizationFailed.Code || denied.Topic != nil || len(denied.Partitions) != 0 || denied.TopicID != topicID("t") {
		t.Errorf("topic t by id without Describe: code %d, name %v, %d partitions, id %x; want 29, no name, none, its id",
			denied.ErrorCode, denied.Topic, len(denied.Partitions), denied.TopicID)
	}
	if allowed.ErrorCode != 0 || allowed.Topic == nil || *allowed.Topic != "u" || len(allowed.Partitions) != 4 {
		t.Errorf("topic u by id with Describe: %+v", allowed)
	}
	if unknown.ErrorCode != kerr.UnknownTopicID.Code || unknown.Topic != nil {
		t.Errorf("unknown id: code %d name %v, want UNKNOWN_TOPIC_ID and no name", unknown.ErrorCode, unknown.Topic)
	}
}
