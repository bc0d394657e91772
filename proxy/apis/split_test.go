package apis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// tp is a topic partition; partAnswer is one partition of a response.
type tp struct {
	topic string
	part  int32
}

type partAnswer struct {
	tp
	code int16
	val  int64
}

func nameOf(id [16]byte) string {
	for _, n := range []string{"t", "u"} {
		if topicID(n) == id {
			return n
		}
	}
	return fmt.Sprintf("id:%x", id)
}

func topicName(name string, id [16]byte, byID bool) string {
	if byID {
		return nameOf(id)
	}
	return name
}

// partAPI describes one partition-scoped API for the table-driven tests.
type partAPI struct {
	key   kmsg.Key
	build func(v int16, spec []tp) kmsg.Request
	parts func(kmsg.Request) []tp
	resp  func(kmsg.Response) []partAnswer
}

// group turns a flat spec into topics in first-seen order.
func group(spec []tp) (names []string, parts map[string][]int32) {
	parts = map[string][]int32{}
	for _, x := range spec {
		if _, ok := parts[x.topic]; !ok {
			names = append(names, x.topic)
		}
		parts[x.topic] = append(parts[x.topic], x.part)
	}
	return names, parts
}

var partAPIs = []partAPI{
	{
		key: kmsg.Produce,
		build: func(v int16, spec []tp) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TimeoutMillis = v, -1, 5000
			names, parts := group(spec)
			for _, n := range names {
				t := kmsg.ProduceRequestTopic{Topic: n, TopicID: topicID(n)}
				for _, p := range parts[n] {
					t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: []byte{9, byte(p), 9}})
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		parts: func(q kmsg.Request) (out []tp) {
			r := q.(*kmsg.ProduceRequest)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if len(p.Records) != 3 || p.Records[1] != byte(p.Partition) {
						panic(fmt.Sprintf("records of %d not carried: %v", p.Partition, p.Records))
					}
					out = append(out, tp{topicName(t.Topic, t.TopicID, r.Version >= 13), p.Partition})
				}
			}
			return out
		},
		resp: func(x kmsg.Response) (out []partAnswer) {
			r := x.(*kmsg.ProduceResponse)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out = append(out, partAnswer{tp{topicName(t.Topic, t.TopicID, r.Version >= 13), p.Partition}, p.ErrorCode, p.BaseOffset})
				}
			}
			return out
		},
	},
	{
		key: kmsg.Fetch,
		build: func(v int16, spec []tp) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MinBytes = v, 500, 1<<30 // wait for every broker
			names, parts := group(spec)
			for _, n := range names {
				t := kmsg.FetchRequestTopic{Topic: n, TopicID: topicID(n)}
				for _, p := range parts[n] {
					fp := kmsg.NewFetchRequestTopicPartition()
					fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, int64(p)*10, 1<<20
					t.Partitions = append(t.Partitions, fp)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		parts: func(q kmsg.Request) (out []tp) {
			r := q.(*kmsg.FetchRequest)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					if p.FetchOffset != int64(p.Partition)*10 {
						panic(fmt.Sprintf("fetch offset of %d not carried", p.Partition))
					}
					out = append(out, tp{topicName(t.Topic, t.TopicID, r.Version >= 13), p.Partition})
				}
			}
			return out
		},
		resp: func(x kmsg.Response) (out []partAnswer) {
			r := x.(*kmsg.FetchResponse)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					out = append(out, partAnswer{tp{topicName(t.Topic, t.TopicID, r.Version >= 13), p.Partition}, p.ErrorCode, p.HighWatermark})
				}
			}
			return out
		},
	},
	{
		key: kmsg.ListOffsets,
		build: func(v int16, spec []tp) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = v
			names, parts := group(spec)
			for _, n := range names {
				t := kmsg.ListOffsetsRequestTopic{Topic: n}
				for _, p := range parts[n] {
					lp := kmsg.NewListOffsetsRequestTopicPartition()
					lp.Partition, lp.Timestamp = p, -1
					t.Partitions = append(t.Partitions, lp)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		parts: func(q kmsg.Request) (out []tp) {
			for _, t := range q.(*kmsg.ListOffsetsRequest).Topics {
				for _, p := range t.Partitions {
					out = append(out, tp{t.Topic, p.Partition})
				}
			}
			return out
		},
		resp: func(x kmsg.Response) (out []partAnswer) {
			r := x.(*kmsg.ListOffsetsResponse)
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					v := p.Offset
					if r.Version == 0 {
						v = p.OldStyleOffsets[0]
					}
					out = append(out, partAnswer{tp{t.Topic, p.Partition}, p.ErrorCode, v})
				}
			}
			return out
		},
	},
	{
		key: kmsg.OffsetForLeaderEpoch,
		build: func(v int16, spec []tp) kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.Version = v
			names, parts := group(spec)
			for _, n := range names {
				t := kmsg.OffsetForLeaderEpochRequestTopic{Topic: n}
				for _, p := range parts[n] {
					ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
					ep.Partition, ep.LeaderEpoch = p, 1
					t.Partitions = append(t.Partitions, ep)
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		parts: func(q kmsg.Request) (out []tp) {
			for _, t := range q.(*kmsg.OffsetForLeaderEpochRequest).Topics {
				for _, p := range t.Partitions {
					out = append(out, tp{t.Topic, p.Partition})
				}
			}
			return out
		},
		resp: func(x kmsg.Response) (out []partAnswer) {
			for _, t := range x.(*kmsg.OffsetForLeaderEpochResponse).Topics {
				for _, p := range t.Partitions {
					out = append(out, partAnswer{tp{t.Topic, p.Partition}, p.ErrorCode, p.EndOffset})
				}
			}
			return out
		},
	},
	{
		key: kmsg.DeleteRecords,
		build: func(v int16, spec []tp) kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.Version, r.TimeoutMillis = v, 5000
			names, parts := group(spec)
			for _, n := range names {
				t := kmsg.DeleteRecordsRequestTopic{Topic: n}
				for _, p := range parts[n] {
					t.Partitions = append(t.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: p, Offset: 10})
				}
				r.Topics = append(r.Topics, t)
			}
			return r
		},
		parts: func(q kmsg.Request) (out []tp) {
			for _, t := range q.(*kmsg.DeleteRecordsRequest).Topics {
				for _, p := range t.Partitions {
					out = append(out, tp{t.Topic, p.Partition})
				}
			}
			return out
		},
		resp: func(x kmsg.Response) (out []partAnswer) {
			for _, t := range x.(*kmsg.DeleteRecordsResponse).Topics {
				for _, p := range t.Partitions {
					out = append(out, partAnswer{tp{t.Topic, p.Partition}, p.ErrorCode, p.LowWatermark})
				}
			}
			return out
		},
	},
}

// spread spans all three brokers, in an order unlike broker order.
var spread = []tp{{"t", 5}, {"t", 0}, {"t", 9}, {"u", 2}, {"t", 3}, {"t", 14}, {"u", 0}, {"t", 1}, {"t", 7}}

// TestSplitMergeEveryVersion sends each partition-scoped API at every
// advertised version across three brokers and checks each sub-request and
// the merged answer.
func TestSplitMergeEveryVersion(t *testing.T) {
	for _, api := range partAPIs {
		t.Run(api.key.Name(), func(t *testing.T) {
			d, f, _ := newTestDispatcher(t)
			vr := d.vers.current().get(int16(api.key))
			if !vr.ok() {
				t.Fatalf("%s not advertised", api.key.Name())
			}
			for v := vr.min; v <= vr.max; v++ {
				before := len(f.requests(api.key))
				req := api.build(v, spread)
				want := api.parts(req) // the client's order: grouped by topic
				resp := roundTrip(t, d, req)
				checkSubs(t, api, v, f.requests(api.key)[before:], want)
				checkMerged(t, api, v, resp, want)
			}
		})
	}
}

func checkSubs(t *testing.T, api partAPI, v int16, subs []sent, want []tp) {
	t.Helper()
	var all []tp
	brokers := map[int32]bool{}
	for _, s := range subs {
		if s.ver != v {
			t.Fatalf("%s v%d: broker %d got v%d", api.key.Name(), v, s.broker, s.ver)
		}
		if brokers[s.broker] {
			t.Fatalf("%s v%d: broker %d got two sub-requests", api.key.Name(), v, s.broker)
		}
		brokers[s.broker] = true
		got := api.parts(s.req)
		for _, x := range got {
			if owner(x.topic, x.part) != s.broker {
				t.Fatalf("%s v%d: broker %d got %s/%d it does not own", api.key.Name(), v, s.broker, x.topic, x.part)
			}
		}
		// Each sub-request keeps the client's relative order.
		var mine []tp
		for _, x := range want {
			if owner(x.topic, x.part) == s.broker {
				mine = append(mine, x)
			}
		}
		if !slices.Equal(got, mine) {
			t.Fatalf("%s v%d: broker %d got %v, want %v", api.key.Name(), v, s.broker, got, mine)
		}
		all = append(all, got...)
	}
	if len(brokers) != 3 || len(all) != len(want) {
		t.Fatalf("%s v%d: %d sub-requests carrying %d partitions, want 3 carrying %d", api.key.Name(), v, len(brokers), len(all), len(want))
	}
}

func checkMerged(t *testing.T, api partAPI, v int16, resp kmsg.Response, want []tp) {
	t.Helper()
	got := api.resp(resp)
	if len(got) != len(want) {
		t.Fatalf("%s v%d: %d partitions answered, want %d: %v", api.key.Name(), v, len(got), len(want), got)
	}
	for i, a := range got {
		if a.tp != want[i] || a.code != 0 || a.val != value(owner(a.topic, a.part), a.part) {
			t.Fatalf("%s v%d: answer %d = %+v, want %v from broker %d", api.key.Name(), v, i, a, want[i], owner(want[i].topic, want[i].part))
		}
	}
}

// TestSingleBrokerFastPath: a request whose partitions all live on one
// broker is forwarded byte for byte, and a clean answer comes back byte
// for byte.
func TestSingleBrokerFastPath(t *testing.T) {
	one := []tp{{"t", 0}, {"t", 3}, {"t", 6}, {"t", 9}} // all broker 1
	for _, api := range partAPIs {
		t.Run(api.key.Name(), func(t *testing.T) {
			d, f, _ := newTestDispatcher(t)
			vr := d.vers.current().get(int16(api.key))
			for _, v := range []int16{vr.min, vr.max} {
				before := len(f.requests(api.key))
				req := api.build(v, one)
				body := req.AppendTo(nil)
				reply, err := call(t, d, req)
				if err != nil {
					t.Fatal(err)
				}
				subs := f.requests(api.key)[before:]
				if len(subs) != 1 || string(subs[0].body) != string(body) {
					t.Fatalf("v%d: want the body forwarded unchanged to one broker, got %d sub-requests", v, len(subs))
				}
				answer := f.okResponse(1, subs[0].req).AppendTo(nil)
				if string(replyBytes(reply)) != string(answer) {
					t.Fatalf("v%d: answer was re-encoded", v)
				}
			}
		})
	}
}

// TestClientIDForwarded: sub-requests and forwarded requests carry the
// client's own id, so that brokers apply quotas and ACLs and log by it.
func TestClientIDForwarded(t *testing.T) {
	id := "billing-app"
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		key  kmsg.Key
	}{
		{"split produce", partAPIs[0].build(9, spread), kmsg.Produce},
		{"split fetch", partAPIs[1].build(11, spread), kmsg.Fetch},
		{"forwarded heartbeat", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version, r.Group, r.MemberID = 4, "g1", "m"
			return r
		}(), kmsg.Heartbeat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, f, _ := newTestDispatcher(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h := Header{Key: tc.req.Key(), Version: tc.req.GetVersion(), CorrelationID: 1, ClientID: &id}
			if _, err := d.Begin(ctx, 1, h, tc.req.AppendTo(nil)).Finish(ctx); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests(tc.key)
			if len(reqs) == 0 {
				t.Fatal("nothing sent")
			}
			for _, r := range reqs {
				if r.clientID == nil || *r.clientID != id {
					t.Fatalf("broker %d got client id %v, want %q", r.broker, r.clientID, id)
				}
			}
		})
	}
}
