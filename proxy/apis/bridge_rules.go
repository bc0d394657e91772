package apis

import (
	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The per-API halves of bridgeRules (bridge.go): what a request asks that
// a version cannot carry, and the fields versions spell differently.

// fetchCarries: follower fetches (a replica id or replica state) are
// brokers' business and never bridged.
func fetchCarries(req kmsg.Request, _ int16) bool {
	r := req.(*kmsg.FetchRequest)
	return r.ReplicaID < 0 && r.ReplicaState.ID < 0
}

// specialTimestampSince is the ListOffsets version that introduced each
// special timestamp beyond earliest (-2) and latest (-1): max timestamp
// (KIP-734), local log start (KIP-405), last tiered offset (KIP-1005).
var specialTimestampSince = map[int64]int16{-3: 7, -4: 8, -5: 9}

// listOffsetsCarries: a special timestamp goes only to a version that knows
// it (an unknown one only to the client's own version or later), and
// read_committed only to v2+.
func listOffsetsCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.ListOffsetsRequest)
	if r.IsolationLevel != 0 && to < 2 {
		return false
	}
	for ti := range r.Topics {
		for _, p := range r.Topics[ti].Partitions {
			if p.Timestamp >= -2 {
				continue
			}
			since, known := specialTimestampSince[p.Timestamp]
			if !known {
				since = r.Version
			}
			if to < since {
				return false
			}
		}
	}
	return true
}

// offsetCommitCarries: a static member's commit (group.instance.id, v7+)
// goes only to v7+.
func offsetCommitCarries(req kmsg.Request, to int16) bool {
	return req.(*kmsg.OffsetCommitRequest).InstanceID == nil || to >= 7
}

// joinGroupCarries: group.instance.id needs v5+. A v0 join has no
// rebalance timeout: Kafka takes the session timeout for it, and so does
// the proxy for a v1+ broker.
func joinGroupCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.JoinGroupRequest)
	if r.InstanceID != nil && to < 5 {
		return false
	}
	if r.Version == 0 && to >= 1 {
		r.RebalanceTimeoutMillis = r.SessionTimeoutMillis
	}
	return true
}

// joinGroupAgain: a v0-v3 client that joined without a member id is
// rejoined with the one a v4+ broker gave it with MEMBER_ID_REQUIRED;
// once only, as the rejoin carries an id.
func joinGroupAgain(resp kmsg.Response, req kmsg.Request) bool {
	r, q := resp.(*kmsg.JoinGroupResponse), req.(*kmsg.JoinGroupRequest)
	if q.Version >= 4 || r.Version < 4 || q.MemberID != "" || r.MemberID == "" || r.ErrorCode != kerr.MemberIDRequired.Code {
		return false
	}
	q.MemberID = r.MemberID
	return true
}

// offsetFetchAnswer: v0-v1 have no group-level error code; Kafka answers
// them with the group's error in every partition asked about.
func offsetFetchAnswer(resp kmsg.Response, req kmsg.Request) {
	r, q := resp.(*kmsg.OffsetFetchResponse), req.(*kmsg.OffsetFetchRequest)
	if q.Version >= 2 || r.ErrorCode == 0 {
		return
	}
	r.Topics = answer.ErrorResponse(q, r.ErrorCode).(*kmsg.OffsetFetchResponse).Topics
}

// instanceCarries: group.instance.id (SyncGroup, Heartbeat) needs since+.
func instanceCarries(since int16) func(kmsg.Request, int16) bool {
	return func(req kmsg.Request, to int16) bool {
		var id *string
		switch r := req.(type) {
		case *kmsg.SyncGroupRequest:
			id = r.InstanceID
		case *kmsg.HeartbeatRequest:
			id = r.InstanceID
		}
		return id == nil || to >= since
	}
}

// leaveGroupCarries maps v0-v2's one member id onto v3+'s list of members
// and back; a v3+ request for several members, or for a static member,
// cannot be sent below v3.
func leaveGroupCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.LeaveGroupRequest)
	switch {
	case r.Version < 3 && to >= 3:
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = r.MemberID
		r.Members = []kmsg.LeaveGroupRequestMember{m}
	case r.Version >= 3 && to < 3:
		if len(r.Members) != 1 || r.Members[0].InstanceID != nil {
			return false
		}
		r.MemberID = r.Members[0].MemberID
	}
	return true
}

// leaveGroupAnswer: a v0-v2 client reads one error code, the member's when
// the request's is 0; a v3+ client of a v0-v2 broker gets its member
// answered with the request's code.
func leaveGroupAnswer(resp kmsg.Response, req kmsg.Request) {
	r, q := resp.(*kmsg.LeaveGroupResponse), req.(*kmsg.LeaveGroupRequest)
	switch {
	case q.Version < 3 && r.Version >= 3:
		for _, m := range r.Members {
			r.ErrorCode = cmpOr(r.ErrorCode, m.ErrorCode)
		}
	case q.Version >= 3 && r.Version < 3:
		r.Members = r.Members[:0]
		for _, qm := range q.Members {
			m := kmsg.NewLeaveGroupResponseMember()
			m.MemberID, m.InstanceID, m.ErrorCode = qm.MemberID, qm.InstanceID, r.ErrorCode
			r.Members = append(r.Members, m)
		}
	}
}

// describeGroupsCarries: every version asks the same (a lower broker
// leaves authorized operations at "not given", which Kafka's own brokers
// may answer too).
func describeGroupsCarries(kmsg.Request, int16) bool { return true }
