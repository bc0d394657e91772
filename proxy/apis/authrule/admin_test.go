package authrule

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTransactionRules(t *testing.T) {
	initPID := func(id *string) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID = id
			return r
		}
	}
	run(t, kmsg.InitProducerID, []ruleCase{
		{name: "transactional allowed", rule: InitProducerID, grants: []grant{{txnT, "x", write}}, req: initPID(kmsg.StringPtr("x"))},
		{name: "transactional denied", rule: InitProducerID, grants: []grant{{topicT, "t", write}}, req: initPID(kmsg.StringPtr("x")), refuse: txnDenied},
		{name: "idempotent by IdempotentWrite", rule: InitProducerID, grants: []grant{{clusterT, "", kmsg.ACLOperationIdempotentWrite}}, req: initPID(nil)},
		{name: "idempotent by a topic write (KIP-679)", rule: InitProducerID, grants: []grant{{topicT, "t", write}}, req: initPID(nil)},
		{name: "idempotent denied", rule: InitProducerID, grants: []grant{{topicT, "t", read}}, req: initPID(nil), refuse: clusterDenied},
	})
	addParts := func(version int16) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.Version, r.TransactionalID = version, "x"
			for _, n := range []string{"t1", "t2"} {
				t := kmsg.NewAddPartitionsToTxnRequestTopic()
				t.Topic, t.Partitions = n, []int32{0}
				r.Topics = append(r.Topics, t)
			}
			return r
		}
	}
	run(t, kmsg.AddPartitionsToTxn, []ruleCase{
		{name: "allowed", rule: AddPartitionsToTxn, grants: []grant{{txnT, "x", write}, {topicT, "t1", write}, {topicT, "t2", write}}, req: addParts(3),
			codes: map[string]int16{"t1/0": 0, "t2/0": 0}},
		{name: "txn denied", rule: AddPartitionsToTxn, grants: []grant{{topicT, "t1", write}}, req: addParts(3), refuse: txnDenied},
		// Kafka: one denied topic fails the request; the authorized
		// partitions answer OPERATION_NOT_ATTEMPTED.
		{name: "one topic denied", rule: AddPartitionsToTxn, grants: []grant{{txnT, "x", write}, {topicT, "t1", write}}, req: addParts(3),
			kept: []string{}, empty: true, codes: map[string]int16{"t1/0": notAttempted, "t2/0": topicDenied}},
		{name: "v4 is broker to broker", rule: AddPartitionsToTxn, grants: []grant{{txnT, "x", write}}, req: addParts(4), refuse: clusterDenied},
	})
	addOffsets := func() kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.Group = "x", "g"
		return r
	}
	run(t, kmsg.AddOffsetsToTxn, []ruleCase{
		{name: "allowed", rule: AddOffsetsToTxn, grants: []grant{{txnT, "x", write}, {groupT, "g", read}}, req: addOffsets},
		{name: "txn first", rule: AddOffsetsToTxn, req: addOffsets, refuse: txnDenied},
		{name: "group denied", rule: AddOffsetsToTxn, grants: []grant{{txnT, "x", write}}, req: addOffsets, refuse: groupDenied},
	})
	endTxn := func() kmsg.Request {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID = "x"
		return r
	}
	run(t, kmsg.EndTxn, []ruleCase{
		{name: "allowed", rule: EndTxn, grants: []grant{{txnT, "x", write}}, req: endTxn},
		{name: "describe is not write", rule: EndTxn, grants: []grant{{txnT, "x", describe}}, req: endTxn, refuse: txnDenied},
	})
}

func TestCoordinatorAndClusterRules(t *testing.T) {
	find := func(version int16, typ int8, keys ...string) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version, r.CoordinatorType = version, typ
			if version < 4 {
				r.CoordinatorKey = keys[0]
			} else {
				r.CoordinatorKeys = keys
			}
			return r
		}
	}
	run(t, kmsg.FindCoordinator, []ruleCase{
		{name: "v3 group allowed", rule: FindCoordinator, grants: []grant{{groupT, "g", describe}}, req: find(3, 0, "g")},
		{name: "v3 group denied", rule: FindCoordinator, req: find(3, 0, "g"), refuse: groupDenied},
		{name: "v3 txn denied", rule: FindCoordinator, grants: []grant{{groupT, "x", describe}}, req: find(3, 1, "x"), refuse: txnDenied},
	})
	// v4+: each key is answered; denied ones get their code and no node.
	req := find(4, 0, "g1", "g2")().(*kmsg.FindCoordinatorRequest)
	var v Verdict
	FindCoordinator(guardOf(kmsg.FindCoordinator, grant{groupT, "g2", describe}), req, &v)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = 4
	for _, k := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = k, 7, "proxy", 9092
		resp.Coordinators = append(resp.Coordinators, c)
	}
	for _, p := range v.Patch {
		p(resp)
	}
	g1, g2 := resp.Coordinators[0], resp.Coordinators[1]
	if v.Refuse != 0 || g1.ErrorCode != groupDenied || g1.NodeID != -1 || g1.Host != "" || g2.ErrorCode != 0 || g2.NodeID != 7 {
		t.Errorf("v4: refuse %d, g1 %+v, g2 %+v; want g1 denied without a node, g2 answered", v.Refuse, g1, g2)
	}

	describeCluster := func() kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() }
	run(t, kmsg.DescribeCluster, []ruleCase{
		{name: "allowed", rule: DescribeCluster, grants: []grant{{clusterT, "", describe}}, req: describeCluster},
		{name: "denied", rule: DescribeCluster, grants: []grant{{topicT, "t", describe}}, req: describeCluster, refuse: clusterDenied},
	})
	for _, c := range []struct {
		key  kmsg.Key
		rule Rule
		op   kmsg.ACLOperation
	}{
		{kmsg.DescribeLogDirs, DescribeLogDirs, describe},
		{kmsg.DescribeClientQuotas, DescribeClientQuotas, kmsg.ACLOperationDescribeConfigs},
		{kmsg.AlterClientQuotas, AlterClientQuotas, kmsg.ACLOperationAlterConfigs},
		{kmsg.DescribeUserSCRAMCredentials, DescribeSCRAM, describe},
		{kmsg.AlterUserSCRAMCredentials, AlterSCRAM, alter},
	} {
		req := func() kmsg.Request { return kmsg.RequestForKey(int16(c.key)) }
		run(t, c.key, []ruleCase{
			{name: "allowed", rule: c.rule, grants: []grant{{clusterT, "", c.op}}, req: req},
			{name: "denied", rule: c.rule, grants: []grant{{clusterT, "", kmsg.ACLOperationIdempotentWrite}}, req: req, refuse: clusterDenied},
		})
	}
}

func TestTopicAdminRules(t *testing.T) {
	createTopics := func() kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		for _, n := range []string{"t1", "t2"} {
			x := kmsg.NewCreateTopicsRequestTopic()
			x.Topic = n
			r.Topics = append(r.Topics, x)
		}
		return r
	}
	run(t, kmsg.CreateTopics, []ruleCase{
		{name: "create on the cluster", rule: CreateTopics, grants: []grant{{clusterT, "", create}}, req: createTopics,
			codes: map[string]int16{"t1": 0, "t2": 0}},
		{name: "create on one topic", rule: CreateTopics, grants: []grant{{topicT, "t2", create}}, req: createTopics,
			kept: []string{"t2"}, codes: map[string]int16{"t2": 0, "t1": topicDenied}},
	})
	createParts := func() kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		for _, n := range []string{"t1", "t2"} {
			x := kmsg.NewCreatePartitionsRequestTopic()
			x.Topic = n
			r.Topics = append(r.Topics, x)
		}
		return r
	}
	run(t, kmsg.CreatePartitions, []ruleCase{
		{name: "alter on one topic", rule: CreatePartitions, grants: []grant{{topicT, "t1", alter}, {topicT, "t2", create}}, req: createParts,
			kept: []string{"t1"}, codes: map[string]int16{"t1": 0, "t2": topicDenied}},
	})
	deleteV5 := func() kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.Version, r.TopicNames = 5, []string{"t1", "t2"}
		return r
	}
	deleteV6 := func() kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.Version = 6
		byName, byID, unknown := kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic(), kmsg.NewDeleteTopicsRequestTopic()
		byName.Topic = kmsg.StringPtr("t1")
		byID.TopicID[0] = 1     // "byid" (names)
		unknown.TopicID[0] = 99 // the broker's to answer
		r.Topics = []kmsg.DeleteTopicsRequestTopic{byName, byID, unknown}
		return r
	}
	run(t, kmsg.DeleteTopics, []ruleCase{
		// (The stand-in broker answer does not list v5's TopicNames: only
		// the patch's answer shows.)
		{name: "v5 one denied", rule: DeleteTopics, grants: []grant{{topicT, "t2", del}}, req: deleteV5,
			kept: []string{"t2"}, codes: map[string]int16{"t1": topicDenied}},
		{name: "v5 all denied", rule: DeleteTopics, req: deleteV5,
			kept: []string{}, empty: true, codes: map[string]int16{"t1": topicDenied, "t2": topicDenied}},
		// By id: authorized by the name the id resolves to; an unknown id
		// goes on to the broker.
		{name: "v6 by id denied", rule: DeleteTopics, grants: []grant{{topicT, "t1", del}}, req: deleteV6,
			kept: []string{"t1"}},
	})
	// The id entries are unnamed: check them here.
	del6 := deleteV6().(*kmsg.DeleteTopicsRequest)
	var v Verdict
	DeleteTopics(guardOf(kmsg.DeleteTopics, grant{topicT, "t1", del}), del6, &v)
	if len(del6.Topics) != 2 || del6.Topics[0].Topic == nil || *del6.Topics[0].Topic != "t1" || del6.Topics[1].TopicID[0] != 99 {
		t.Errorf("v6: left %+v, want t1 by name and the unknown id", del6.Topics)
	}
	resp := brokerAnswer(del6, &v).(*kmsg.DeleteTopicsResponse)
	if n := len(resp.Topics); n != 3 || resp.Topics[2].TopicID[0] != 1 || resp.Topics[2].ErrorCode != topicDenied {
		t.Errorf("v6 answer %+v, want the id of byid denied last", resp.Topics)
	}
	configs := func(key kmsg.Key) func() kmsg.Request {
		return func() kmsg.Request {
			switch r := kmsg.RequestForKey(int16(key)).(type) {
			case *kmsg.DescribeConfigsRequest:
				for _, x := range []struct {
					rt   kmsg.ConfigResourceType
					name string
				}{{kmsg.ConfigResourceTypeTopic, "t1"}, {kmsg.ConfigResourceTypeTopic, "t2"}, {kmsg.ConfigResourceTypeBroker, "1"}} {
					e := kmsg.NewDescribeConfigsRequestResource()
					e.ResourceType, e.ResourceName = x.rt, x.name
					r.Resources = append(r.Resources, e)
				}
				return r
			case *kmsg.AlterConfigsRequest:
				for _, n := range []string{"t1", "t2"} {
					e := kmsg.NewAlterConfigsRequestResource()
					e.ResourceType, e.ResourceName = kmsg.ConfigResourceTypeTopic, n
					r.Resources = append(r.Resources, e)
				}
				return r
			case *kmsg.IncrementalAlterConfigsRequest:
				e := kmsg.NewIncrementalAlterConfigsRequestResource()
				e.ResourceType, e.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
				r.Resources = append(r.Resources, e)
				return r
			}
			panic("no configs request for " + key.Name())
		}
	}
	run(t, kmsg.DescribeConfigs, []ruleCase{
		// A topic's configs by the topic (29), a broker's by the cluster (31).
		{name: "topic and broker denied", rule: DescribeConfigs, grants: []grant{{topicT, "t1", kmsg.ACLOperationDescribeConfigs}}, req: configs(kmsg.DescribeConfigs),
			kept: []string{"t1"}, codes: map[string]int16{"t1": 0, "t2": topicDenied, "1": clusterDenied}},
	})
	run(t, kmsg.AlterConfigs, []ruleCase{
		{name: "describe is not alter", rule: AlterConfigs, grants: []grant{{topicT, "t1", kmsg.ACLOperationAlterConfigs}, {topicT, "t2", kmsg.ACLOperationDescribeConfigs}},
			req: configs(kmsg.AlterConfigs), kept: []string{"t1"}, codes: map[string]int16{"t1": 0, "t2": topicDenied}},
	})
	run(t, kmsg.IncrementalAlterConfigs, []ruleCase{
		{name: "broker allowed", rule: IncrementalAlterConfigs, grants: []grant{{clusterT, "", kmsg.ACLOperationAlterConfigs}}, req: configs(kmsg.IncrementalAlterConfigs),
			codes: map[string]int16{"1": 0}},
		{name: "broker denied", rule: IncrementalAlterConfigs, req: configs(kmsg.IncrementalAlterConfigs),
			kept: []string{}, empty: true, codes: map[string]int16{"1": clusterDenied}},
	})
}

// TestTopicCheck: consecutive partitions of one topic share one decision,
// RefuseAll answers every partition, no session checks nothing.
func TestTopicCheck(t *testing.T) {
	c := NewTopicCheck(guardOf(kmsg.Produce, grant{topicT, "t1", write}), write)
	for _, x := range []struct {
		topic string
		want  int16
	}{{"t1", 0}, {"t1", 0}, {"t2", topicDenied}, {"t1", 0}} {
		if got := c.Denied(x.topic); got != x.want {
			t.Errorf("Denied(%s) = %d, want %d", x.topic, got, x.want)
		}
	}
	c.RefuseAll(txnDenied)
	if got := c.Denied("t1"); got != txnDenied {
		t.Errorf("after RefuseAll: %d, want %d", got, txnDenied)
	}
	off := NewTopicCheck(Guard{}, write)
	if off.Guard().On() || off.Denied("t2") != 0 {
		t.Error("a guard without a session denied something")
	}
	var none *TopicCheck
	if none.Denied("t2") != 0 {
		t.Error("a nil check denied something")
	}
}

// TestMetadataDenied: a named topic without Describe is denied whether it
// exists or not; a topic to create needs Create on the cluster or itself.
func TestMetadataDenied(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"seen", "hidden", "new1", "new2"} {
		x := kmsg.NewMetadataRequestTopic()
		x.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, x)
	}
	g := guardOf(kmsg.Metadata, grant{topicT, "seen", describe}, grant{topicT, "new1", describe}, grant{topicT, "new1", create},
		grant{topicT, "new2", describe})
	got := g.MetadataDenied(req, []string{"new1", "new2"})
	want := map[string]int16{"hidden": topicDenied, "new2": topicDenied}
	if len(got) != len(want) || got["hidden"] != want["hidden"] || got["new2"] != want["new2"] {
		t.Errorf("denied %v, want %v", got, want)
	}
	if d := guardOf(kmsg.Metadata, grant{clusterT, "", create}, grant{topicT, "new2", describe}).MetadataDenied(req, []string{"new2"}); d["new2"] != 0 {
		t.Errorf("create on the cluster: new2 denied %d", d["new2"])
	}
	if (Guard{}).MetadataDenied(req, []string{"new2"}) != nil {
		t.Error("no session: something denied")
	}
}
