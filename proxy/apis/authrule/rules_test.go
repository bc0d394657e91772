package authrule

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	describe = kmsg.ACLOperationDescribe
	del      = kmsg.ACLOperationDelete
	create   = kmsg.ACLOperationCreate
	alter    = kmsg.ACLOperationAlter

	topicDenied   = 29 // kerr.TopicAuthorizationFailed
	groupDenied   = 30 // kerr.GroupAuthorizationFailed
	clusterDenied = 31 // kerr.ClusterAuthorizationFailed
	txnDenied     = 53 // kerr.TransactionalIDAuthorizationFailed
	notAttempted  = 55 // kerr.OperationNotAttempted
)

// ruleCase is one request a rule decides for a principal with grants.
type ruleCase struct {
	name   string
	rule   Rule
	grants []grant
	req    func() kmsg.Request
	// refuse: the whole request's code. kept: the entries left in the
	// request (nil: none removed). codes: the answer after the broker
	// answered the rest with 0 and the patches ran (only checked when
	// not refused).
	refuse int16
	kept   []string
	empty  bool
	codes  map[string]int16
}

func TestCodesMatchKerr(t *testing.T) {
	for c, e := range map[int16]*kerr.Error{
		topicDenied: kerr.TopicAuthorizationFailed, groupDenied: kerr.GroupAuthorizationFailed,
		clusterDenied: kerr.ClusterAuthorizationFailed, txnDenied: kerr.TransactionalIDAuthorizationFailed,
		notAttempted: kerr.OperationNotAttempted,
	} {
		if c != e.Code {
			t.Errorf("%s is %d here, %d in kerr", e.Message, c, e.Code)
		}
	}
}

func run(t *testing.T, key kmsg.Key, cases []ruleCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(key.Name()+"/"+c.name, func(t *testing.T) {
			req := c.req()
			before := listed(req)
			var v Verdict
			c.rule(guardOf(key, c.grants...), req, &v)
			if v.Refuse != c.refuse {
				t.Fatalf("refuse = %d, want %d", v.Refuse, c.refuse)
			}
			if c.refuse != 0 {
				return
			}
			if got := listed(req); c.kept != nil && !slices.Equal(got, c.kept) {
				t.Errorf("kept %v of %v, want %v", got, before, c.kept)
			} else if c.kept == nil && !slices.Equal(got, before) {
				t.Errorf("stripped %v to %v, want nothing stripped", before, got)
			}
			if v.Stripped != (c.kept != nil) {
				t.Errorf("Stripped = %v, want %v", v.Stripped, c.kept != nil)
			}
			if v.Empty != c.empty {
				t.Errorf("Empty = %v, want %v", v.Empty, c.empty)
			}
			if c.codes != nil {
				if got := flatCodes(brokerAnswer(req, &v)); !maps.Equal(got, c.codes) {
					t.Errorf("answer codes %v, want %v", got, c.codes)
				}
			}
		})
	}
}

func oneGroupCases(rule Rule, req func() kmsg.Request) []ruleCase {
	return []ruleCase{
		{name: "allowed", rule: rule, grants: []grant{{groupT, "g", read}}, req: req},
		{name: "denied", rule: rule, grants: []grant{{groupT, "other", read}, {topicT, "t", read}}, req: req, refuse: groupDenied},
	}
}

func TestOneGroupRules(t *testing.T) {
	run(t, kmsg.JoinGroup, oneGroupCases(JoinGroup, func() kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group = "g"
		return r
	}))
	run(t, kmsg.SyncGroup, oneGroupCases(SyncGroup, func() kmsg.Request {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group = "g"
		return r
	}))
	run(t, kmsg.Heartbeat, oneGroupCases(Heartbeat, func() kmsg.Request {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group = "g"
		return r
	}))
	run(t, kmsg.LeaveGroup, oneGroupCases(LeaveGroup, func() kmsg.Request {
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group = "g"
		return r
	}))
	run(t, kmsg.ConsumerGroupHeartbeat, oneGroupCases(ConsumerGroupHeartbeat, func() kmsg.Request {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group = "g"
		return r
	}))
}

// commitTopics builds OffsetCommit, TxnOffsetCommit and OffsetDelete
// topics t1 and t2 with partition 0.
func offsetCommit() kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group = 8, "g"
	for _, n := range []string{"t1", "t2"} {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.Partitions = n, []kmsg.OffsetCommitRequestTopicPartition{kmsg.NewOffsetCommitRequestTopicPartition()}
		r.Topics = append(r.Topics, t)
	}
	return r
}

func TestOffsetCommitRules(t *testing.T) {
	run(t, kmsg.OffsetCommit, []ruleCase{
		{name: "allowed", rule: OffsetCommit, grants: []grant{{groupT, "g", read}, {topicT, "t1", read}, {topicT, "t2", read}}, req: offsetCommit,
			codes: map[string]int16{"t1/0": 0, "t2/0": 0}},
		{name: "group denied", rule: OffsetCommit, grants: []grant{{topicT, "t1", read}}, req: offsetCommit, refuse: groupDenied},
		{name: "one topic denied", rule: OffsetCommit, grants: []grant{{groupT, "g", read}, {topicT, "t1", read}}, req: offsetCommit,
			kept: []string{"t1"}, codes: map[string]int16{"t1/0": 0, "t2/0": topicDenied}},
		{name: "every topic denied", rule: OffsetCommit, grants: []grant{{groupT, "g", read}}, req: offsetCommit,
			kept: []string{}, empty: true, codes: map[string]int16{"t1/0": topicDenied, "t2/0": topicDenied}},
	})
	txnCommit := func() kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group = "x", "g"
		for _, n := range []string{"t1", "t2"} {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic, t.Partitions = n, []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	run(t, kmsg.TxnOffsetCommit, []ruleCase{
		// Kafka checks the transactional id first.
		{name: "txn and group denied", rule: TxnOffsetCommit, req: txnCommit, refuse: txnDenied},
		{name: "group denied", rule: TxnOffsetCommit, grants: []grant{{txnT, "x", write}}, req: txnCommit, refuse: groupDenied},
		{name: "one topic denied", rule: TxnOffsetCommit, grants: []grant{{txnT, "x", write}, {groupT, "g", read}, {topicT, "t2", read}}, req: txnCommit,
			kept: []string{"t2"}, codes: map[string]int16{"t2/0": 0, "t1/0": topicDenied}},
	})
	offsetDelete := func() kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		for _, n := range []string{"t1", "t2"} {
			t := kmsg.NewOffsetDeleteRequestTopic()
			t.Topic, t.Partitions = n, []kmsg.OffsetDeleteRequestTopicPartition{kmsg.NewOffsetDeleteRequestTopicPartition()}
			r.Topics = append(r.Topics, t)
		}
		return r
	}
	run(t, kmsg.OffsetDelete, []ruleCase{
		{name: "read on the group is not delete", rule: OffsetDelete, grants: []grant{{groupT, "g", read}}, req: offsetDelete, refuse: groupDenied},
		{name: "one topic denied", rule: OffsetDelete, grants: []grant{{groupT, "g", del}, {topicT, "t1", read}}, req: offsetDelete,
			kept: []string{"t1"}, codes: map[string]int16{"t1/0": 0, "t2/0": topicDenied}},
	})
}

func TestOffsetFetchRule(t *testing.T) {
	v7 := func(topics ...string) func() kmsg.Request {
		return func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = 7, "g"
			for _, n := range topics {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic, t.Partitions = n, []int32{0}
				r.Topics = append(r.Topics, t)
			}
			return r
		}
	}
	v8 := func() kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 8
		for _, g := range []string{"g1", "g2"} {
			q := kmsg.NewOffsetFetchRequestGroup()
			q.Group = g
			for _, n := range []string{"t1", "t2"} {
				t := kmsg.NewOffsetFetchRequestGroupTopic()
				t.Topic, t.Partitions = n, []int32{0}
				q.Topics = append(q.Topics, t)
			}
			r.Groups = append(r.Groups, q)
		}
		return r
	}
	run(t, kmsg.OffsetFetch, []ruleCase{
		{name: "v7 group denied", rule: OffsetFetch, grants: []grant{{topicT, "t1", describe}}, req: v7("t1"), refuse: groupDenied},
		{name: "v7 one topic denied", rule: OffsetFetch, grants: []grant{{groupT, "g", describe}, {topicT, "t1", describe}}, req: v7("t1", "t2"),
			kept: []string{"t1"}, codes: map[string]int16{"t1/0": 0, "t2/0": topicDenied}},
		{name: "v8 one group and one topic denied", rule: OffsetFetch,
			grants: []grant{{groupT, "g1", describe}, {topicT, "t1", describe}}, req: v8,
			kept: []string{"g1"}, codes: map[string]int16{
				"g1": 0, "g1/t1/0": 0, "g1/t2/0": topicDenied,
				"g2": groupDenied, "g2/t1/0": groupDenied, "g2/t2/0": groupDenied,
			}},
	})
	// Every topic of the group (Topics nil): what may not be described is
	// left out of the broker's answer.
	req := v7()().(*kmsg.OffsetFetchRequest)
	req.Topics = nil
	var v Verdict
	OffsetFetch(guardOf(kmsg.OffsetFetch, grant{groupT, "g", describe}, grant{topicT, "seen", describe}), req, &v)
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = 7
	for _, n := range []string{"seen", "hidden"} {
		t := kmsg.NewOffsetFetchResponseTopic()
		t.Topic = n
		resp.Topics = append(resp.Topics, t)
	}
	for _, p := range v.Patch {
		p(resp)
	}
	if v.Refuse != 0 || v.Stripped || len(resp.Topics) != 1 || resp.Topics[0].Topic != "seen" {
		t.Errorf("all topics: refuse %d, stripped %v, answer %v; want only topic seen", v.Refuse, v.Stripped, resp.Topics)
	}
}

func groupsReq(key kmsg.Key) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.RequestForKey(int16(key))
		switch r := r.(type) {
		case *kmsg.DescribeGroupsRequest:
			r.Groups = []string{"g1", "g2"}
		case *kmsg.DeleteGroupsRequest:
			r.Groups = []string{"g1", "g2"}
		case *kmsg.ConsumerGroupDescribeRequest:
			r.Groups = []string{"g1", "g2"}
		}
		return r
	}
}

func TestGroupListRules(t *testing.T) {
	run(t, kmsg.DescribeGroups, []ruleCase{
		{name: "allowed", rule: DescribeGroups, grants: []grant{{groupT, "g1", describe}, {groupT, "g2", describe}}, req: groupsReq(kmsg.DescribeGroups),
			codes: map[string]int16{"g1": 0, "g2": 0}},
		{name: "one denied", rule: DescribeGroups, grants: []grant{{groupT, "g2", describe}}, req: groupsReq(kmsg.DescribeGroups),
			kept: []string{"g2"}, codes: map[string]int16{"g2": 0, "g1": groupDenied}},
	})
	run(t, kmsg.DeleteGroups, []ruleCase{
		{name: "describe is not delete", rule: DeleteGroups, grants: []grant{{groupT, "g1", describe}, {groupT, "g2", del}}, req: groupsReq(kmsg.DeleteGroups),
			kept: []string{"g2"}, codes: map[string]int16{"g2": 0, "g1": groupDenied}},
	})
	run(t, kmsg.ConsumerGroupDescribe, []ruleCase{
		{name: "all denied", rule: ConsumerGroupDescribe, req: groupsReq(kmsg.ConsumerGroupDescribe),
			kept: []string{}, empty: true, codes: map[string]int16{"g1": groupDenied, "g2": groupDenied}},
	})
	// Authorized operations are filled in for the groups answered.
	req := groupsReq(kmsg.DescribeGroups)().(*kmsg.DescribeGroupsRequest)
	req.Version, req.IncludeAuthorizedOperations = 3, true
	var v Verdict
	DescribeGroups(guardOf(kmsg.DescribeGroups, grant{groupT, "g1", describe}, grant{groupT, "g2", describe}, grant{groupT, "g2", read}), req, &v)
	resp := brokerAnswer(req, &v).(*kmsg.DescribeGroupsResponse)
	ops := map[string]int32{}
	for _, g := range resp.Groups {
		ops[g.Group] = g.AuthorizedOperations
	}
	bit := func(op kmsg.ACLOperation) int32 { return 1 << op }
	if ops["g1"] != bit(describe) || ops["g2"] != bit(describe)|bit(read) {
		t.Errorf("authorized operations %v, want g1 Describe, g2 Describe|Read", ops)
	}
}

func TestListGroupsRule(t *testing.T) {
	answered := func() *kmsg.ListGroupsResponse {
		resp := kmsg.NewPtrListGroupsResponse()
		for _, g := range []string{"g1", "g2"} {
			x := kmsg.NewListGroupsResponseGroup()
			x.Group = g
			resp.Groups = append(resp.Groups, x)
		}
		return resp
	}
	for _, c := range []struct {
		name   string
		grants []grant
		want   []string
	}{
		{"describe on the cluster lists all", []grant{{clusterT, "", describe}}, []string{"g1", "g2"}},
		{"else only describable groups", []grant{{groupT, "g2", describe}}, []string{"g2"}},
		{"none", nil, nil},
	} {
		var v Verdict
		ListGroups(guardOf(kmsg.ListGroups, c.grants...), kmsg.NewPtrListGroupsRequest(), &v)
		resp := answered()
		for _, p := range v.Patch {
			p(resp)
		}
		var got []string
		for _, g := range resp.Groups {
			got = append(got, g.Group)
		}
		if v.Refuse != 0 || v.Stripped || !slices.Equal(got, c.want) {
			t.Errorf("%s: refuse %d stripped %v groups %v, want %v", c.name, v.Refuse, v.Stripped, got, c.want)
		}
	}
}
