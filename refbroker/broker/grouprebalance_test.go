package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type rawMember struct {
	t     *testing.T
	cl    kmsg.Requestor
	group string // "": "rb"
	id    string
	gen   int32
}

func (m *rawMember) groupID() string {
	if m.group == "" {
		return "rb"
	}
	return m.group
}

// join sends JoinGroup (following MEMBER_ID_REQUIRED once) and returns the
// response.
func (m *rawMember) join(ctx context.Context, sessionMs int32) *kmsg.JoinGroupResponse {
	m.t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = m.groupID(), m.id, sessionMs, 5000
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}, {Name: "sticky", Metadata: []byte("s")}}
	for {
		resp, err := req.RequestWith(ctx, m.cl)
		if err != nil {
			m.t.Errorf("join: %v", err)
			return nil
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code && req.MemberID == "" {
			req.MemberID = resp.MemberID
			continue
		}
		if resp.ErrorCode == 0 {
			m.id, m.gen = resp.MemberID, resp.Generation
		}
		return resp
	}
}

func (m *rawMember) sync(ctx context.Context, assign map[string]string) *kmsg.SyncGroupResponse {
	m.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.groupID(), m.id, m.gen
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Errorf("sync: %v", err) // may run on a helper goroutine: no Fatal
		return kmsg.NewPtrSyncGroupResponse()
	}
	return resp
}

func (m *rawMember) heartbeat(ctx context.Context) int16 {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.groupID(), m.id, m.gen
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("heartbeat: %v", err)
	}
	return resp.ErrorCode
}

func describeGroup(ctx context.Context, t *testing.T, cl kmsg.Requestor) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"rb"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	return resp.Groups[0]
}

func TestGroupRebalanceLifecycle(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.clientFor([]string{b.Addr()})
	ctx := testCtx(t, 60*time.Second)
	bc := direct(cl, b)
	a := &rawMember{t: t, cl: bc}
	if r := a.join(ctx, 10000); r.ErrorCode != 0 || r.LeaderID != a.id || len(r.Members) != 1 || *r.Protocol != "range" {
		t.Fatalf("first join: %+v", r)
	}
	if r := a.sync(ctx, map[string]string{a.id: "all"}); r.ErrorCode != 0 || string(r.MemberAssignment) != "all" {
		t.Fatalf("first sync: %+v", r)
	}

	// A second member joins: its join waits until the first rejoins.
	second := &rawMember{t: t, cl: bc}
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { joined <- second.join(ctx, 1000) }()
	for code := a.heartbeat(ctx); code != kerr.RebalanceInProgress.Code; code = a.heartbeat(ctx) {
		if code != 0 {
			t.Fatalf("heartbeat while second joins: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := a.join(ctx, 10000); r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 2 {
		t.Fatalf("leader rejoin: %+v", r)
	}
	if r := <-joined; r == nil || r.ErrorCode != 0 || r.Generation != 2 || len(r.Members) != 0 || r.LeaderID != a.id {
		t.Fatalf("second join: %+v", r)
	}
	syncDone := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { syncDone <- second.sync(ctx, nil) }() // waits for the leader's assignment
	if r := a.sync(ctx, map[string]string{a.id: "p0", second.id: "p1"}); r.ErrorCode != 0 || string(r.MemberAssignment) != "p0" {
		t.Fatalf("leader sync: %+v", r)
	}
	if r := <-syncDone; r.ErrorCode != 0 || string(r.MemberAssignment) != "p1" {
		t.Fatalf("follower sync: %+v", r)
	}
	if d := describeGroup(ctx, t, bc); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}

	// The second member stops heartbeating: its 1s session ends, the group
	// rebalances without it.
	for code := a.heartbeat(ctx); code != kerr.RebalanceInProgress.Code; code = a.heartbeat(ctx) {
		if ctx.Err() != nil {
			t.Fatal("session of a silent member never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := a.join(ctx, 10000); r.ErrorCode != 0 || r.Generation != 3 || len(r.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", r)
	}
	if code := second.heartbeat(ctx); code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member heartbeat: %v", kerr.ErrorForCode(code))
	}

	// Batched leave: one known, one unknown member.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "rb"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.id}, {MemberID: "ghost"}}
	lr, err := leave.RequestWith(ctx, bc)
	if err != nil || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %v %+v", err, lr)
	}
	if d := describeGroup(ctx, t, bc); d.State != "Empty" && d.State != "Dead" {
		t.Fatalf("state after everyone left: %s", d.State)
	}
	list := kmsg.NewPtrListGroupsRequest()
	ll, err := list.RequestWith(ctx, bc)
	if err != nil || len(ll.Groups) != 1 || ll.Groups[0].Group != "rb" {
		t.Fatalf("list groups: %v %+v", err, ll)
	}

	// Delete: unknown without offsets; after a commit it can be deleted.
	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"rb"}
		resp, err := req.RequestWith(ctx, bc)
		if err != nil {
			t.Fatalf("delete groups: %v", err)
		}
		return resp.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete group without offsets: %v", kerr.ErrorForCode(code))
	}
	c.createTopic(cl, "t", 1)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "rb", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: topicID(ctx, t, cl, "t"),
		Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp, err := req.RequestWith(ctx, bc); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "rb"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if resp, err := od.RequestWith(ctx, bc); err != nil || resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %v %+v", err, resp)
	}
	if code := del(); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete group whose offsets were deleted: %v", kerr.ErrorForCode(code))
	}
	if resp, err := req.RequestWith(ctx, bc); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}
	if code := del(); code != 0 {
		t.Fatalf("delete group: %v", kerr.ErrorForCode(code))
	}
}
