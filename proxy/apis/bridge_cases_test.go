package apis

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/proxy/apis/answer"
)

// The per-API cases of the bridge tests (bridge_test.go): a request with
// distinctive fields, a broker's answer with distinctive fields, and the
// checks of both sides at any client and broker version.

var testBatch = kwiretest.Batch{ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, LeaderEpoch: -1, Values: kwiretest.Values("a", "b")}.Encode()

var bridgeCases = []bridgeCase{
	{
		key: kmsg.Produce,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TimeoutMillis = v, -1, 1500
			t := kmsg.NewProduceRequestTopic()
			t.Topic = "t"
			p := kmsg.NewProduceRequestTopicPartition()
			p.Partition, p.Records = 0, testBatch
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = 0, 41, 1234, 7
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			resp.ThrottleMillis = 3
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, a, g kmsg.Response) {
			cq, bq, br, got := c.(*kmsg.ProduceRequest), b.(*kmsg.ProduceRequest), a.(*kmsg.ProduceResponse), g.(*kmsg.ProduceResponse)
			bp := bq.Topics[0].Partitions[0]
			errIf(t, bq.Acks != cq.Acks || bq.TimeoutMillis != cq.TimeoutMillis || bq.TransactionID != nil, "request fields %+v", bq)
			errIf(t, bq.Topics[0].Topic != "t" || bp.Partition != 0 || !bytes.Equal(bp.Records, testBatch), "records not forwarded as they were")
			gp := got.Topics[0].Partitions[0]
			errIf(t, gp.BaseOffset != 41 || gp.ErrorCode != 0, "answer %+v", gp)
			errIf(t, cq.Version >= 2 && gp.LogAppendTime != either[int64](br.Version >= 2, 1234, -1), "LogAppendTime %d", gp.LogAppendTime)
			wantLSO := int64(-1) // Kafka's default where the broker's version lacks it
			if cq.Version >= 5 && br.Version >= 5 {
				wantLSO = 7
			}
			errIf(t, cq.Version >= 5 && gp.LogStartOffset != wantLSO, "LogStartOffset %d, want %d", gp.LogStartOffset, wantLSO)
			errIf(t, cq.Version >= 10 && (gp.CurrentLeader.LeaderID != -1 || gp.CurrentLeader.LeaderEpoch != -1), "leader hint %+v, want the defaults", gp.CurrentLeader)
			errIf(t, cq.Version >= 1 && got.ThrottleMillis != either[int32](br.Version >= 1, 3, 0), "throttle %d", got.ThrottleMillis)
		},
	},
	{
		key: kmsg.Fetch,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.IsolationLevel = v, 250, 1<<20, 1<<20, 1 // MinBytes: wait for both brokers
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = "t", topicID("t")
			for _, part := range []int32{0, 1} { // two brokers: split and bridged
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = part, 100+int64(part), 4096, 5
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			q := req.(*kmsg.FetchRequest)
			resp := q.ResponseKind().(*kmsg.FetchResponse)
			for _, qt := range q.Topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = qt.Topic, qt.TopicID
				for _, qp := range qt.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = qp.Partition, 900, 800, 11
					rp.RecordBatches = testBatch
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.FetchRequest), b.(*kmsg.FetchRequest), g.(*kmsg.FetchResponse)
			errIf(t, bq.MaxWaitMillis <= 0 || bq.MaxWaitMillis > 250 || bq.MinBytes != 1<<20 || bq.ReplicaID != -1, "request fields %+v", bq)
			errIf(t, bq.Version >= 4 && bq.IsolationLevel != 1, "isolation level %d", bq.IsolationLevel)
			errIf(t, bq.Version >= 7 && (bq.SessionID != 0 || bq.SessionEpoch != -1), "session %d/%d", bq.SessionID, bq.SessionEpoch)
			bp := bq.Topics[0].Partitions[0]
			wantEpoch := either[int32](cq.Version >= 9, 5, -1) // not sent below v9
			errIf(t, bp.FetchOffset < 100 || bp.PartitionMaxBytes != 4096 || (bq.Version >= 9 && bp.CurrentLeaderEpoch != wantEpoch), "partition %+v", bp)
			errIf(t, bq.Version < 13 && bq.Topics[0].Topic != "t" || bq.Version >= 13 && bq.Topics[0].TopicID != topicID("t"), "topic %q %x", bq.Topics[0].Topic, bq.Topics[0].TopicID)
			n := 0
			for _, tp := range got.Topics {
				for _, p := range tp.Partitions {
					n++
					errIf(t, p.HighWatermark != 900 || !bytes.Equal(p.RecordBatches, testBatch), "answer %+v", p)
					errIf(t, cq.Version >= 4 && p.LastStableOffset != 800, "LastStableOffset %d", p.LastStableOffset)
					errIf(t, cq.Version >= 5 && p.LogStartOffset != either[int64](bq.Version >= 5, 11, -1), "LogStartOffset %d", p.LogStartOffset)
					errIf(t, cq.Version >= 11 && p.PreferredReadReplica != -1, "PreferredReadReplica %d", p.PreferredReadReplica)
				}
			}
			errIf(t, n != 2, "%d partitions answered, want 2", n)
		},
	},
	{
		key: kmsg.ListOffsets,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = v
			if v >= 2 {
				r.IsolationLevel = 1
			}
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = "t"
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp, p.CurrentLeaderEpoch = 2, -1, 5
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset, rp.Timestamp, rp.LeaderEpoch, rp.OldStyleOffsets = 2, 333, 99, 5, []int64{333}
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.ListOffsetsRequest), b.(*kmsg.ListOffsetsRequest), g.(*kmsg.ListOffsetsResponse)
			bp := bq.Topics[0].Partitions[0]
			errIf(t, (bq.Version >= 2 && bq.IsolationLevel != cq.IsolationLevel) || bp.Timestamp != -1 || bq.ReplicaID != -1, "request %+v", bq)
			errIf(t, bq.Version >= 4 && bp.CurrentLeaderEpoch != either[int32](cq.Version >= 4, 5, -1), "leader epoch %d", bp.CurrentLeaderEpoch)
			gp := got.Topics[0].Partitions[0]
			if cq.Version == 0 {
				errIf(t, len(gp.OldStyleOffsets) != 1 || gp.OldStyleOffsets[0] != 333, "v0 answer %+v", gp)
				return
			}
			errIf(t, gp.Offset != 333 || gp.Timestamp != 99, "answer %+v", gp)
			errIf(t, cq.Version >= 4 && gp.LeaderEpoch != either[int32](bq.Version >= 4, 5, -1), "leader epoch %d", gp.LeaderEpoch)
		},
	},
	{
		key: kmsg.OffsetCommit,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Version, r.Group, r.Generation, r.MemberID = v, "g1", 3, "m1"
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = "t"
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			meta := "meta"
			p.Partition, p.Offset, p.Metadata, p.LeaderEpoch = 4, 77, &meta, 5
			t.Partitions = append(t.Partitions, p)
			r.Topics = append(r.Topics, t)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := answer.ErrorResponse(req, 0).(*kmsg.OffsetCommitResponse)
			resp.Topics[0].Partitions[0].ErrorCode = kerr.OffsetMetadataTooLarge.Code
			resp.ThrottleMillis = 4
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.OffsetCommitRequest), b.(*kmsg.OffsetCommitRequest), g.(*kmsg.OffsetCommitResponse)
			bp := bq.Topics[0].Partitions[0]
			errIf(t, bq.Group != "g1" || bq.RetentionTimeMillis != -1, "request %+v", bq)
			errIf(t, bq.Version >= 1 && cq.Version >= 1 && (bq.Generation != 3 || bq.MemberID != "m1"), "member %d %q", bq.Generation, bq.MemberID)
			errIf(t, bp.Partition != 4 || bp.Offset != 77 || bp.Metadata == nil || *bp.Metadata != "meta", "partition %+v", bp)
			gp := got.Topics[0].Partitions[0]
			errIf(t, gp.Partition != 4 || gp.ErrorCode != kerr.OffsetMetadataTooLarge.Code, "answer %+v", gp)
			errIf(t, cq.Version >= 3 && got.ThrottleMillis != either[int32](bq.Version >= 3, 4, 0), "throttle %d", got.ThrottleMillis)
		},
	},
	{
		key: kmsg.OffsetFetch,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = v, "g1"
			t := kmsg.NewOffsetFetchRequestTopic()
			t.Topic, t.Partitions = "t", []int32{4}
			r.Topics = append(r.Topics, t)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			meta := "meta"
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 4, 77, 5, &meta
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.OffsetFetchRequest), b.(*kmsg.OffsetFetchRequest), g.(*kmsg.OffsetFetchResponse)
			errIf(t, bq.Group != "g1" || len(bq.Topics) != 1 || bq.Topics[0].Topic != "t" || len(bq.Topics[0].Partitions) != 1 || bq.Topics[0].Partitions[0] != 4, "request %+v", bq)
			gp := got.Topics[0].Partitions[0]
			errIf(t, gp.Partition != 4 || gp.Offset != 77 || gp.Metadata == nil || *gp.Metadata != "meta", "answer %+v", gp)
			wantEpoch := either[int32](bq.Version >= 5, 5, -1)
			errIf(t, gp.LeaderEpoch != wantEpoch && cq.Version >= 5, "leader epoch %d, want %d", gp.LeaderEpoch, wantEpoch)
		},
	},
	{
		key: kmsg.JoinGroup,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Version, r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.MemberID, r.ProtocolType = v, "g1", 10000, 20000, "m1", "consumer"
			if v >= 8 {
				reason := "why"
				r.Reason = &reason
			}
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", []byte{1, 2}
			r.Protocols = append(r.Protocols, p)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			proto := "range"
			resp.Generation, resp.Protocol, resp.LeaderID, resp.MemberID = 3, &proto, "m1", "m1"
			m := kmsg.NewJoinGroupResponseMember()
			m.MemberID, m.ProtocolMetadata = "m1", []byte{1, 2}
			resp.Members = append(resp.Members, m)
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.JoinGroupRequest), b.(*kmsg.JoinGroupRequest), g.(*kmsg.JoinGroupResponse)
			wantRebalance := either[int32](cq.Version >= 1, 20000, 10000) // v0 has none: Kafka takes the session timeout
			if bq.Version == 0 {
				wantRebalance = bq.RebalanceTimeoutMillis // not sent
			}
			errIf(t, bq.Group != "g1" || bq.SessionTimeoutMillis != 10000 || bq.RebalanceTimeoutMillis != wantRebalance || bq.MemberID != "m1" || bq.ProtocolType != "consumer" || bq.InstanceID != nil,
				"request %+v", bq)
			errIf(t, len(bq.Protocols) != 1 || bq.Protocols[0].Name != "range" || !bytes.Equal(bq.Protocols[0].Metadata, []byte{1, 2}), "protocols %+v", bq.Protocols)
			errIf(t, got.Generation != 3 || got.Protocol == nil || *got.Protocol != "range" || got.LeaderID != "m1" || got.MemberID != "m1", "answer %+v", got)
			errIf(t, len(got.Members) != 1 || !bytes.Equal(got.Members[0].ProtocolMetadata, []byte{1, 2}), "members %+v", got.Members)
			errIf(t, got.ProtocolType != nil || got.SkipAssignment, "protocol type %v skip %v, want Kafka's defaults", got.ProtocolType, got.SkipAssignment)
		},
	},
	{
		key: kmsg.SyncGroup,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Version, r.Group, r.Generation, r.MemberID = v, "g1", 3, "m1"
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = "m1", []byte{9}
			r.GroupAssignment = append(r.GroupAssignment, a)
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.MemberAssignment, resp.ThrottleMillis = []byte{9, 8}, 2
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.SyncGroupRequest), b.(*kmsg.SyncGroupRequest), g.(*kmsg.SyncGroupResponse)
			errIf(t, bq.Group != "g1" || bq.Generation != 3 || bq.MemberID != "m1" || len(bq.GroupAssignment) != 1 || !bytes.Equal(bq.GroupAssignment[0].MemberAssignment, []byte{9}),
				"request %+v", bq)
			errIf(t, !bytes.Equal(got.MemberAssignment, []byte{9, 8}) || got.ErrorCode != 0, "answer %+v", got)
			errIf(t, cq.Version >= 1 && got.ThrottleMillis != either[int32](bq.Version >= 1, 2, 0), "throttle %d", got.ThrottleMillis)
			errIf(t, got.ProtocolType != nil || got.Protocol != nil, "protocol %v %v, want Kafka's defaults", got.ProtocolType, got.Protocol)
		},
	},
	{
		key: kmsg.Heartbeat,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version, r.Group, r.Generation, r.MemberID = v, "g1", 3, "m1"
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return resp
		},
		check: func(t *testing.T, _, b kmsg.Request, _, g kmsg.Response) {
			bq, got := b.(*kmsg.HeartbeatRequest), g.(*kmsg.HeartbeatResponse)
			errIf(t, bq.Group != "g1" || bq.Generation != 3 || bq.MemberID != "m1" || bq.InstanceID != nil, "request %+v", bq)
			errIf(t, got.ErrorCode != kerr.RebalanceInProgress.Code, "answer %+v", got)
		},
	},
	{
		key: kmsg.LeaveGroup,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Version, r.Group = v, "g1"
			if v < 3 {
				r.MemberID = "m1"
			} else {
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m1"
				r.Members = append(r.Members, m)
			}
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			if req.GetVersion() < 3 {
				resp.ErrorCode = kerr.UnknownMemberID.Code
			}
			for _, m := range req.(*kmsg.LeaveGroupRequest).Members {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.ErrorCode = m.MemberID, kerr.UnknownMemberID.Code
				resp.Members = append(resp.Members, rm)
			}
			return resp
		},
		check: func(t *testing.T, c, b kmsg.Request, _, g kmsg.Response) {
			cq, bq, got := c.(*kmsg.LeaveGroupRequest), b.(*kmsg.LeaveGroupRequest), g.(*kmsg.LeaveGroupResponse)
			errIf(t, bq.Group != "g1" || (bq.Version >= 3 && (len(bq.Members) != 1 || bq.Members[0].MemberID != "m1")) || (bq.Version < 3 && bq.MemberID != "m1"), "request %+v", bq)
			if cq.Version < 3 {
				errIf(t, got.ErrorCode != kerr.UnknownMemberID.Code, "v%d answer code %d, want the member's", cq.Version, got.ErrorCode)
				return
			}
			errIf(t, len(got.Members) != 1 || got.Members[0].MemberID != "m1" || got.Members[0].ErrorCode != kerr.UnknownMemberID.Code, "answer %+v", got)
			errIf(t, bq.Version >= 3 && got.ErrorCode != 0, "top-level code %d from a v%d broker", got.ErrorCode, bq.Version)
		},
	},
	{
		key: kmsg.DescribeGroups,
		build: func(v int16) kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Version, r.Groups = v, []string{"g1", "g2"} // two coordinators
			return r
		},
		answer: func(req kmsg.Request) kmsg.Response {
			resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
			for _, name := range req.(*kmsg.DescribeGroupsRequest).Groups {
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.State, g.ProtocolType, g.Protocol = name, "Stable", "consumer", "range"
				m := kmsg.NewDescribeGroupsResponseGroupMember()
				m.MemberID, m.ClientID, m.MemberAssignment = "m1", "c1", []byte{7}
				g.Members = append(g.Members, m)
				resp.Groups = append(resp.Groups, g)
			}
			return resp
		},
		check: func(t *testing.T, _, b kmsg.Request, _, g kmsg.Response) {
			bq, got := b.(*kmsg.DescribeGroupsRequest), g.(*kmsg.DescribeGroupsResponse)
			errIf(t, len(bq.Groups) != 1, "sub-request groups %v", bq.Groups)
			errIf(t, len(got.Groups) != 2 || got.Groups[0].Group != "g1" || got.Groups[1].Group != "g2", "answer groups %+v", got.Groups)
			for _, gr := range got.Groups {
				errIf(t, gr.State != "Stable" || gr.Protocol != "range" || len(gr.Members) != 1 || gr.Members[0].ClientID != "c1" || !bytes.Equal(gr.Members[0].MemberAssignment, []byte{7}), "group %+v", gr)
				errIf(t, gr.ErrorMessage != nil, "error message %v, want Kafka's default", gr.ErrorMessage)
			}
		},
	},
}
