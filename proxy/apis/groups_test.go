package apis

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/retry"
)

var sixGroups = []string{"g4", "g0", "g2", "g1", "g5", "g3"}

func coordinator(group string) int32 {
	var n int32
	fmt.Sscanf(group, "g%d", &n)
	return 1 + n%3
}

// buildFor fills a request of any group or admin API generically: its
// group (or group list) and transactional id.
func buildFor(key int16, v int16, groups []string) kmsg.Request {
	req := kmsg.RequestForKey(key)
	if d, ok := req.(interface{ Default() }); ok {
		d.Default()
	}
	req.SetVersion(v)
	rv := reflect.ValueOf(req).Elem()
	if f := rv.FieldByName("Group"); f.IsValid() && f.Kind() == reflect.String {
		f.SetString(groups[0])
	}
	if f := rv.FieldByName("TransactionalID"); f.IsValid() {
		switch f.Kind() {
		case reflect.String:
			f.SetString("txn-1")
		case reflect.Pointer:
			f.Set(reflect.ValueOf(kmsg.StringPtr("txn-1")))
		}
	}
	if f := rv.FieldByName("Groups"); f.IsValid() {
		switch g := f.Addr().Interface().(type) {
		case *[]string:
			*g = groups
		case *[]kmsg.OffsetFetchRequestGroup:
			for _, name := range groups {
				*g = append(*g, kmsg.OffsetFetchRequestGroup{Group: name, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1, 2}}}})
			}
		}
	}
	return req
}

// groupsIn lists the groups of a request or response with a Groups list.
func groupsIn(v any) []string {
	f := reflect.ValueOf(v).Elem().FieldByName("Groups")
	var out []string
	for i := range f.Len() {
		e := f.Index(i)
		if e.Kind() == reflect.String {
			out = append(out, e.String())
		} else {
			out = append(out, e.FieldByName("Group").String())
		}
	}
	return out
}

func isList(key int16, v int16) bool {
	switch kmsg.Key(key) {
	case kmsg.DescribeGroups, kmsg.DeleteGroups, kmsg.ConsumerGroupDescribe:
		return true
	case kmsg.OffsetFetch:
		return v >= 8
	}
	return false
}

// TestGroupAndAdminEveryVersion sends every group and admin API at every
// advertised version: single-target requests must reach the right broker
// byte for byte and come back unchanged; group lists must be split per
// coordinator and merged in the client's order.
func TestGroupAndAdminEveryVersion(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	for key := range int16(numKeys) {
		kind := apiTable[key].kind
		if kind != kindGroup && kind != kindAny {
			continue
		}
		vr := d.vers.current().get(key)
		for v := vr.min; v <= vr.max; v++ {
			before := len(f.sent)
			req := buildFor(key, v, sixGroups)
			body := req.AppendTo(nil)
			reply, err := call(t, d, req)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), v, err)
			}
			subs := f.sent[before:]
			if isList(key, v) {
				checkGroupList(t, key, v, subs, decodeReply(t, req, replyBytes(reply)))
				continue
			}
			want := coordinator(sixGroups[0])
			if kind == kindAny {
				want, _ = rt.AnyBroker(adminKey(req), -1)
			}
			if len(subs) != 1 || subs[0].broker != want || string(subs[0].body) != string(body) {
				t.Fatalf("%s v%d: %d sends (first to %d), want the body unchanged to broker %d", kmsg.NameForKey(key), v, len(subs), subs[0].broker, want)
			}
			if answer := f.okResponse(want, subs[0].req).AppendTo(nil); string(answer) != string(replyBytes(reply)) {
				t.Fatalf("%s v%d: answer changed on the way", kmsg.NameForKey(key), v)
			}
		}
	}
}

func checkGroupList(t *testing.T, key, v int16, subs []sent, resp kmsg.Response) {
	t.Helper()
	name := kmsg.NameForKey(key)
	if len(subs) != 3 {
		t.Fatalf("%s v%d: %d sub-requests, want 3", name, v, len(subs))
	}
	for _, s := range subs {
		var want []string
		for _, g := range sixGroups {
			if coordinator(g) == s.broker {
				want = append(want, g)
			}
		}
		if got := groupsIn(s.req); !slices.Equal(got, want) {
			t.Fatalf("%s v%d: broker %d got %v, want %v", name, v, s.broker, got, want)
		}
	}
	if got := groupsIn(resp); !slices.Equal(got, sixGroups) {
		t.Fatalf("%s v%d: merged %v, want the client's order %v", name, v, got, sixGroups)
	}
	if dg, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
		for _, g := range dg.Groups {
			if g.State != fmt.Sprintf("b%d", coordinator(g.Group)) {
				t.Fatalf("DescribeGroups v%d: %s answered by %s", v, g.Group, g.State)
			}
		}
	}
}

func TestGroupRetryNotCoordinator(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(2, kmsg.JoinGroup, func(n int, req kmsg.Request) fakeReply {
		rt.SetCoordinator("g1", 3) // the coordinator moved
		resp := answer.ErrorResponse(req, kerr.NotCoordinator.Code)
		return fakeReply{resp: resp}
	})
	req := buildFor(int16(kmsg.JoinGroup), 9, []string{"g1"})
	body := req.AppendTo(nil)
	resp := roundTrip(t, d, req).(*kmsg.JoinGroupResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("JoinGroup error %d after retry", resp.ErrorCode)
	}
	joins := f.requests(kmsg.JoinGroup)
	if len(joins) != 2 || joins[0].broker != 2 || joins[1].broker != 3 || string(joins[1].body) != string(body) {
		t.Fatalf("joins went to %v, want broker 2 then 3 with the body unchanged", brokersOf(joins))
	}
}

func TestGroupStaleRouteAvoidsRefuser(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(1, kmsg.Heartbeat, func(int, kmsg.Request) fakeReply {
		return fakeReply{sendErr: fmt.Errorf("dial: %w", retry.ErrNotSent)}
	})
	resp := roundTrip(t, d, buildFor(int16(kmsg.Heartbeat), 4, []string{"g0"})).(*kmsg.HeartbeatResponse)
	hbs := f.requests(kmsg.Heartbeat)
	if resp.ErrorCode != 0 || len(hbs) != 2 || hbs[1].broker == 1 {
		t.Fatalf("heartbeat code %d, sends to %v", resp.ErrorCode, brokersOf(hbs))
	}
}

func TestGroupAmbiguousWrite(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.OffsetCommit, func(int, kmsg.Request) fakeReply {
		return fakeReply{err: errors.New("connection reset")}
	})
	req := buildFor(int16(kmsg.OffsetCommit), 8, []string{"g1"}).(*kmsg.OffsetCommitRequest)
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 3, Offset: 10}}}}
	resp := roundTrip(t, d, req).(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("answer %+v, want REQUEST_TIMED_OUT for the partition", resp.Topics)
	}
	if n := len(f.requests(kmsg.OffsetCommit)); n != 1 {
		t.Fatalf("%d commits sent, want 1", n)
	}
}

func TestGroupNoBroker(t *testing.T) {
	d, _, rt := newTestDispatcher(t)
	for b := int32(1); b <= 3; b++ {
		rt.DeleteBroker(b)
	}
	resp := roundTrip(t, d, buildFor(int16(kmsg.SyncGroup), 5, []string{"g1"})).(*kmsg.SyncGroupResponse)
	if resp.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("code %d, want COORDINATOR_NOT_AVAILABLE", resp.ErrorCode)
	}
}

func TestOffsetFetchBatchedRetry(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(3, kmsg.OffsetFetch, func(n int, req kmsg.Request) fakeReply {
		resp := answer.ErrorResponse(req, 0).(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			resp.Groups[i].ErrorCode = kerr.NotCoordinator.Code
			rt.SetCoordinator(resp.Groups[i].Group, 1)
		}
		return fakeReply{resp: resp}
	})
	resp := roundTrip(t, d, buildFor(int16(kmsg.OffsetFetch), 9, sixGroups)).(*kmsg.OffsetFetchResponse)
	if got := groupsIn(resp); !slices.Equal(got, sixGroups) {
		t.Fatalf("merged %v", got)
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("%s: code %d", g.Group, g.ErrorCode)
		}
	}
	if n := f.count(3, kmsg.OffsetFetch); n != 1 {
		t.Fatalf("refusing coordinator asked %d times", n)
	}
}

func TestListGroupsFanOut(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(3, kmsg.ListGroups, func(int, kmsg.Request) fakeReply {
		rt.DeleteBroker(3) // it died: its groups are elsewhere now
		return fakeReply{sendErr: fmt.Errorf("dial: %w", retry.ErrNotSent)}
	})
	for v := int16(0); v <= d.vers.current().get(int16(kmsg.ListGroups)).max; v++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		resp := roundTrip(t, d, req).(*kmsg.ListGroupsResponse)
		var got []string
		for _, g := range resp.Groups {
			got = append(got, g.Group)
		}
		want := []string{"g-b1", "shared", "g-b2"} // each group once; dead broker 3 skipped
		if resp.ErrorCode != 0 || !slices.Equal(got, want) {
			t.Fatalf("v%d: code %d groups %v, want %v", v, resp.ErrorCode, got, want)
		}
	}
}

func TestListGroupsBrokerError(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.ListGroups, func(_ int, req kmsg.Request) fakeReply {
		return fakeReply{resp: answer.ErrorResponse(req, kerr.CoordinatorLoadInProgress.Code)}
	})
	resp := roundTrip(t, d, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
	if resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("code %d: a partial list must carry the broker's error", resp.ErrorCode)
	}
}

func TestAdminRetryNotController(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 3, ReplicationFactor: -1}}
	first, _ := rt.AnyBroker("new", -1)
	f.on(first, kmsg.CreateTopics, func(_ int, req kmsg.Request) fakeReply {
		return fakeReply{resp: answer.ErrorResponse(req, kerr.NotController.Code)}
	})
	resp := roundTrip(t, d, req).(*kmsg.CreateTopicsResponse)
	creates := f.requests(kmsg.CreateTopics)
	if resp.Topics[0].ErrorCode != 0 || len(creates) != 2 || creates[1].broker == first {
		t.Fatalf("code %d, sends to %v", resp.Topics[0].ErrorCode, brokersOf(creates))
	}
	// An ambiguous outcome of an admin write is not repeated.
	f.on(first, kmsg.CreateTopics, func(int, kmsg.Request) fakeReply { return fakeReply{err: errors.New("reset")} })
	resp = roundTrip(t, d, req).(*kmsg.CreateTopicsResponse)
	if resp.Topics[0].ErrorCode != kerr.RequestTimedOut.Code || resp.Topics[0].Topic != "new" {
		t.Fatalf("ambiguous create answered %+v", resp.Topics[0])
	}
}

func brokersOf(ss []sent) []int32 {
	var out []int32
	for _, s := range ss {
		out = append(out, s.broker)
	}
	return out
}

// TestGroupRefusalKeptWhenNoBrokerLeft: a coordinator that refuses while
// every other broker is gone gets its refusal passed on (the client then
// looks for the coordinator), not a local error.
func TestGroupRefusalKeptWhenNoBrokerLeft(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(2, kmsg.Heartbeat, func(_ int, req kmsg.Request) fakeReply {
		for _, b := range []int32{1, 2, 3} {
			rt.DeleteBroker(b)
		}
		return fakeReply{resp: answer.ErrorResponse(req, kerr.NotCoordinator.Code)}
	})
	resp := roundTrip(t, d, buildFor(int16(kmsg.Heartbeat), 4, []string{"g1"})).(*kmsg.HeartbeatResponse)
	if resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("code %d, want the coordinator's NOT_COORDINATOR", resp.ErrorCode)
	}
	if n := len(f.requests(kmsg.Heartbeat)); n != 1 {
		t.Fatalf("%d heartbeats sent, want 1", n)
	}
}
