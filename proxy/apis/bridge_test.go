package apis

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafscaleRanges is the version table KafScale's brokers answer for the
// APIs the proxy bridges (and the two it answers itself).
var kafscaleRanges = map[kmsg.Key]vrange{
	kmsg.Produce: {0, 9}, kmsg.Fetch: {11, 13}, kmsg.ListOffsets: {0, 4}, kmsg.Metadata: {0, 13},
	kmsg.OffsetCommit: {3, 3}, kmsg.OffsetFetch: {5, 5}, kmsg.FindCoordinator: {0, 6},
	kmsg.JoinGroup: {4, 4}, kmsg.SyncGroup: {4, 4}, kmsg.Heartbeat: {4, 4}, kmsg.LeaveGroup: {4, 4},
	kmsg.DescribeGroups: {5, 5},
}

// kafscaleOffered is what the proxy must offer clients of such a pool
// (bridge.go says why each bound is where it is).
var kafscaleOffered = map[kmsg.Key]vrange{
	kmsg.Produce: {0, 11}, kmsg.Fetch: {4, 18}, kmsg.ListOffsets: {0, 11}, kmsg.Metadata: {0, 13},
	kmsg.OffsetCommit: {2, 9}, kmsg.OffsetFetch: {1, 6}, kmsg.FindCoordinator: {0, 6},
	kmsg.JoinGroup: {0, 9}, kmsg.SyncGroup: {0, 5}, kmsg.Heartbeat: {0, 4}, kmsg.LeaveGroup: {0, 5},
	kmsg.DescribeGroups: {0, 6},
}

// kafscaleDispatcher is a dispatcher whose three brokers speak KafScale's
// ranges, with its table refreshed.
func kafscaleDispatcher(t *testing.T) (*Dispatcher, *fakeSender, map[int16]vrange) {
	d, f, _ := newTestDispatcher(t)
	limits := map[int16]vrange{}
	for k, r := range kafscaleRanges {
		limits[int16(k)] = r
	}
	for b := int32(1); b <= 3; b++ {
		f.versions[b] = limits
	}
	return d, f, apiVersions(t, d, 3)
}

// TestBridgeOffersKafScale: the advertised table for a KafScale pool.
func TestBridgeOffersKafScale(t *testing.T) {
	_, _, got := kafscaleDispatcher(t)
	for k, want := range kafscaleOffered {
		if got[int16(k)] != want {
			t.Errorf("%s offered %+v, want %+v", k.Name(), got[int16(k)], want)
		}
	}
	// librdkafka 2.0.2 enables MsgVer2 only if Fetch v4 is offered.
	if f := got[int16(kmsg.Fetch)]; f.min > 4 || f.max < 4 {
		t.Errorf("Fetch v4 not offered: %+v", f)
	}
}

// brokerVer is the version a broker speaking r must be sent for a client
// at v: the highest it speaks at most v, or its lowest.
func brokerVer(v int16, r vrange) int16 { return min(max(v, r.min), r.max) }

// bridgeCase is one API of the pair tests: build is the client's request
// at v, answer the broker's answer to what it got, check compares, field
// by field, the broker's request with the client's and the client's answer
// with the broker's.
type bridgeCase struct {
	key    kmsg.Key
	build  func(v int16) kmsg.Request
	answer func(req kmsg.Request) kmsg.Response
	check  func(t *testing.T, client, broker kmsg.Request, answer, got kmsg.Response)
}

// TestBridgePairs: for each bridged API and each version the proxy offers
// a KafScale pool, the broker gets the request at its version with the
// client's fields, and the client gets the broker's answer at its own
// version, with Kafka's defaults for what the broker's version lacks.
func TestBridgePairs(t *testing.T) {
	for _, c := range bridgeCases {
		t.Run(c.key.Name(), func(t *testing.T) {
			off := kafscaleOffered[c.key]
			for v := off.min; v <= off.max; v++ {
				t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
					d, f, _ := kafscaleDispatcher(t)
					var answer kmsg.Response
					for b := int32(1); b <= 3; b++ {
						f.on(b, c.key, func(_ int, req kmsg.Request) fakeReply {
							answer = c.answer(req)
							return fakeReply{resp: answer}
						})
					}
					req := c.build(v)
					got := roundTrip(t, d, req)
					sent := f.requests(c.key)
					if len(sent) == 0 {
						t.Fatalf("nothing sent")
					}
					want := brokerVer(v, kafscaleRanges[c.key])
					for _, s := range sent {
						if s.ver != want {
							t.Fatalf("client v%d sent at v%d, want v%d", v, s.ver, want)
						}
					}
					c.check(t, req, sent[len(sent)-1].req, answer, got)
				})
			}
		})
	}
}

// either is a if cond, else b.
func either[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func errIf(t *testing.T, bad bool, format string, args ...any) {
	t.Helper()
	if bad {
		t.Errorf(format, args...)
	}
}

// TestBridgeRefusesWhatCannotBeCarried: a request whose meaning the
// broker's version cannot carry is answered UNSUPPORTED_VERSION and not
// sent, never sent without what the client asked for.
func TestBridgeRefusesWhatCannotBeCarried(t *testing.T) {
	instance := "static-1"
	cases := []struct {
		name  string
		req   func() kmsg.Request
		codes func(kmsg.Response) []int16
	}{
		{"JoinGroup v5 static member to v4", func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Version, r.Group, r.InstanceID, r.ProtocolType = 5, "g1", &instance, "consumer"
			return r
		}, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.JoinGroupResponse).ErrorCode} }},
		{"OffsetCommit v7 static member to v3", func() kmsg.Request {
			r := bridgeCases[3].build(7).(*kmsg.OffsetCommitRequest)
			r.InstanceID = &instance
			return r
		}, func(r kmsg.Response) []int16 {
			return []int16{r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode}
		}},
		{"ListOffsets v7 max timestamp to v4", func() kmsg.Request {
			r := bridgeCases[2].build(7).(*kmsg.ListOffsetsRequest)
			r.Topics[0].Partitions[0].Timestamp = -3
			return r
		}, func(r kmsg.Response) []int16 {
			return []int16{r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, f, _ := kafscaleDispatcher(t)
			req := c.req()
			got := roundTrip(t, d, req)
			for _, code := range c.codes(got) {
				if code != kerr.UnsupportedVersion.Code {
					t.Errorf("code %d, want UNSUPPORTED_VERSION", code)
				}
			}
			if n := len(f.requests(kmsg.Key(req.Key()))); n != 0 {
				t.Errorf("%d requests sent to brokers, want none", n)
			}
		})
	}
}

// TestBridgeDirectIsRaw: a version the broker speaks is forwarded as the
// client sent it, and a bridged one is not (it is re-encoded at the
// broker's version).
func TestBridgeDirectIsRaw(t *testing.T) {
	for _, c := range []struct {
		v   int16
		raw bool
	}{{9, true}, {11, false}} {
		d, f, _ := kafscaleDispatcher(t)
		req := bridgeCases[0].build(c.v)
		body := req.AppendTo(nil)
		roundTrip(t, d, req)
		sent := f.requests(kmsg.Produce)
		if len(sent) != 1 {
			t.Fatalf("v%d: %d requests sent", c.v, len(sent))
		}
		// (Produce v9 and v11 request bodies are the same bytes.)
		if raw := bytes.Equal(sent[0].body, body) && sent[0].ver == c.v; raw != c.raw {
			t.Errorf("v%d: forwarded as the client sent it: %v, want %v", c.v, raw, c.raw)
		}
	}
}

// TestBridgeJoinGroupMemberIDRequired: a v0-v3 client joining without a
// member id, bridged to a v4 broker that answers MEMBER_ID_REQUIRED, is
// rejoined by the proxy with the id the broker gave, once, and gets the
// answer to that rejoin.
func TestBridgeJoinGroupMemberIDRequired(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			d, f, _ := kafscaleDispatcher(t)
			f.on(2, kmsg.JoinGroup, func(n int, req kmsg.Request) fakeReply { // g1's coordinator
				q := req.(*kmsg.JoinGroupRequest)
				resp := q.ResponseKind().(*kmsg.JoinGroupResponse)
				if q.MemberID == "" {
					resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, "given-1"
					return fakeReply{resp: resp}
				}
				proto := "range"
				resp.Generation, resp.Protocol, resp.LeaderID, resp.MemberID = 1, &proto, q.MemberID, q.MemberID
				return fakeReply{resp: resp}
			})
			req := bridgeCases[5].build(v).(*kmsg.JoinGroupRequest)
			req.MemberID = ""
			got := roundTrip(t, d, req).(*kmsg.JoinGroupResponse)
			if got.ErrorCode != 0 || got.MemberID != "given-1" || got.Generation != 1 {
				t.Fatalf("answer code %d member %q generation %d, want the rejoin's", got.ErrorCode, got.MemberID, got.Generation)
			}
			sent := f.requests(kmsg.JoinGroup)
			if len(sent) != 2 || sent[0].req.(*kmsg.JoinGroupRequest).MemberID != "" || sent[1].req.(*kmsg.JoinGroupRequest).MemberID != "given-1" {
				t.Fatalf("%d joins sent, want the first without and the second with the given id", len(sent))
			}
			for _, s := range sent {
				if s.ver != 4 || s.broker != 2 {
					t.Fatalf("join sent at v%d to broker %d, want v4 to the coordinator", s.ver, s.broker)
				}
			}
		})
	}
}

// TestBridgeOffsetFetchV1GroupError: v1 has no group-level error code; a
// group error of a v5 broker reaches a v1 client in every partition.
func TestBridgeOffsetFetchV1GroupError(t *testing.T) {
	d, f, _ := kafscaleDispatcher(t)
	f.on(2, kmsg.OffsetFetch, func(_ int, req kmsg.Request) fakeReply {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return fakeReply{resp: resp}
	})
	got := roundTrip(t, d, bridgeCases[4].build(1)).(*kmsg.OffsetFetchResponse)
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 || got.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("v1 answer %+v, want the group's error in partition 4", got.Topics)
	}
}

// BenchmarkBridgeNotNeeded: the cost of version bridging where no broker
// needs it, side by side: 16 partitions over 3 brokers with the version
// lookup (what the proxy runs) and without it (as before bridging).
func BenchmarkBridgeNotNeeded(b *testing.B) {
	parts := make([]int32, 16)
	for i := range parts {
		parts[i] = int32(i)
	}
	for _, c := range []struct {
		name string
		hook bool
	}{{"lookup", true}, {"none", false}} {
		b.Run(c.name, func(b *testing.B) {
			d, body := benchProduce(b, parts)
			if !c.hook {
				d.eng.Version = nil
			}
			runProduce(b, d, body)
		})
	}
}

// pairSpans are the client versions each case's build spells right (the
// versions after them name topics or groups another way and are never
// bridged).
var pairSpans = map[kmsg.Key]vrange{
	kmsg.Produce: {0, 12}, kmsg.Fetch: {0, 18}, kmsg.ListOffsets: {0, 11}, kmsg.OffsetCommit: {0, 9},
	kmsg.OffsetFetch: {0, 7}, kmsg.JoinGroup: {0, 9}, kmsg.SyncGroup: {0, 5}, kmsg.Heartbeat: {0, 4},
	kmsg.LeaveGroup: {0, 5}, kmsg.DescribeGroups: {0, 6},
}

// refusedPair: what each case's request asks that a broker version cannot
// carry (ListOffsets: read_committed, which the case asks from v2, needs a
// v2+ broker).
func refusedPair(key kmsg.Key, v, b int16) bool {
	return key == kmsg.ListOffsets && v >= 2 && b < 2
}

// TestBridgeEveryPair: for each bridged API, a pool whose brokers speak
// one version b only, for every b, and every client version the proxy
// offers it: the broker gets the request at b, field by field, and the
// client its answer at its version; a pair whose request cannot be carried
// is answered UNSUPPORTED_VERSION without being sent.
func TestBridgeEveryPair(t *testing.T) {
	pairs := 0
	for _, c := range bridgeCases {
		span := pairSpans[c.key]
		for b := span.min; b <= span.max; b++ {
			d, f, _ := newTestDispatcher(t)
			for id := int32(1); id <= 3; id++ {
				f.versions[id] = map[int16]vrange{int16(c.key): {b, b}}
			}
			off := apiVersions(t, d, 3)[int16(c.key)]
			if off.min > b || off.max < b {
				t.Fatalf("%s: a pool speaking v%d only is offered v%d-v%d", c.key.Name(), b, off.min, off.max)
			}
			for v := max(off.min, span.min); v <= min(off.max, span.max); v++ {
				pairs++
				checkPair(t, c, d, f, v, b)
			}
		}
	}
	t.Logf("%d client/broker version pairs checked", pairs)
}

func checkPair(t *testing.T, c bridgeCase, d *Dispatcher, f *fakeSender, v, b int16) {
	t.Helper()
	f.mu.Lock()
	f.sent = nil
	f.mu.Unlock()
	var answer kmsg.Response
	for id := int32(1); id <= 3; id++ {
		f.on(id, c.key, func(_ int, req kmsg.Request) fakeReply {
			answer = c.answer(req)
			return fakeReply{resp: answer}
		})
	}
	req := c.build(v)
	got := roundTrip(t, d, req)
	sent := f.requests(c.key)
	if refusedPair(c.key, v, b) {
		codes := errorCodes(reflect.ValueOf(got).Elem(), nil)
		if len(sent) != 0 || len(codes) == 0 || slices.ContainsFunc(codes, func(x int16) bool { return x != kerr.UnsupportedVersion.Code }) {
			t.Errorf("%s v%d to v%d: %d sent, codes %v, want UNSUPPORTED_VERSION and nothing sent", c.key.Name(), v, b, len(sent), codes)
		}
		return
	}
	if len(sent) == 0 {
		t.Fatalf("%s v%d to v%d: nothing sent", c.key.Name(), v, b)
	}
	for _, s := range sent {
		if s.ver != b {
			t.Fatalf("%s v%d: sent at v%d, want v%d", c.key.Name(), v, s.ver, b)
		}
	}
	t.Run(fmt.Sprintf("%s/v%d-to-v%d", c.key.Name(), v, b), func(t *testing.T) {
		c.check(t, req, sent[len(sent)-1].req, answer, got)
	})
}

// errorCodes collects the non-zero ErrorCode fields of a response.
func errorCodes(v reflect.Value, dst []int16) []int16 {
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 && f.Int() != 0 {
		dst = append(dst, int16(f.Int()))
	}
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			for j := range f.Len() {
				dst = errorCodes(f.Index(j), dst)
			}
		}
	}
	return dst
}
