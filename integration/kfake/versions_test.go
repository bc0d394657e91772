package kfake

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryAdvertisedVersion sends each version of the core APIs that the
// proxy advertises, through the proxy and to kfake directly, and compares
// the answers field by field (except what differs by design: node ids,
// addresses, cluster id, throttle, produce offsets).
func TestEveryAdvertisedVersion(t *testing.T) {
	const topic, parts, group = "raw", 3, "raw-g"
	e := newEnv(t, topicSpec{topic, parts})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	e.waitRoutes(e.publishCoordinator(ctx, group))
	// Data on every partition, so that fetches and lookups have answers.
	produceKeyed(ctx, t, e.client(), topic, "seed", 60, 12)

	s := &sweep{e: e, ctx: ctx, topic: topic, id: e.ids[topic], parts: parts, group: group,
		px: dialRaw(t, e.srv.Addr()), direct: map[int32]*rawConn{}, kmax: map[kmsg.Key]int16{}, acked: map[int64]string{}}
	for id, addr := range e.nodes {
		s.direct[id] = dialRaw(t, addr)
	}
	proxyV := s.px.apiVersions(ctx, t)
	kfakeV := s.direct[0].apiVersions(ctx, t)

	apis := []struct {
		key    kmsg.Key
		local  bool // answered by the proxy itself: may exceed kfake's range
		sweep  func(t *testing.T, v int16)
		finish func(t *testing.T)
	}{
		{kmsg.Produce, false, s.produce, s.checkProduced},
		{kmsg.Fetch, false, s.fetch, nil},
		{kmsg.ListOffsets, false, s.listOffsets, nil},
		{kmsg.Metadata, true, s.metadata, nil},
		{kmsg.FindCoordinator, true, s.findCoordinator, nil},
		{kmsg.OffsetCommit, false, s.offsetCommit, nil},
		{kmsg.OffsetFetch, false, s.offsetFetch, nil},
	}
	for _, api := range apis {
		name := kmsg.NameForKey(int16(api.key))
		t.Run(name, func(t *testing.T) {
			pr, ok := proxyV[int16(api.key)]
			if !ok {
				t.Fatalf("the proxy does not advertise %s", name)
			}
			kr := kfakeV[int16(api.key)]
			// Above kfake's range the proxy bridges (proxy/apis/bridge.go):
			// those versions are swept too, against kfake's answer at the
			// version the proxy sends it. Below it nothing is bridged.
			if !api.local && pr.min < kr.min {
				t.Errorf("the proxy advertises %s from v%d, kfake serves from v%d: clients may pick a version no broker serves", name, pr.min, kr.min)
			}
			s.kmax[api.key] = kr.max
			t.Logf("%s: proxy v%d-v%d, kfake v%d-v%d", name, pr.min, pr.max, kr.min, kr.max)
			for v := pr.min; v <= pr.max; v++ {
				t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { api.sweep(t, v) })
			}
			if api.finish != nil {
				api.finish(t)
			}
		})
	}
}

type sweep struct {
	e      *env
	ctx    context.Context
	topic  string
	id     [16]byte
	parts  int32
	group  string
	px     *rawConn
	direct map[int32]*rawConn
	kmax   map[kmsg.Key]int16 // the highest version kfake serves, per API
	acked  map[int64]string   // partition 0 offsets of produces through the proxy
	commit int64              // the offset the last OffsetCommit sweep wrote
}

// viaProxy and viaKfake send req; on a transport or decoding error they
// fail the test, re-dial, and return nil.
func (s *sweep) viaProxy(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := s.px.do(s.ctx, req)
	if err != nil {
		t.Errorf("through the proxy: %v", err)
		s.px = dialRaw(t, s.e.srv.Addr())
	}
	return resp
}

func (s *sweep) viaKfake(t *testing.T, node int32, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := s.direct[node].do(s.ctx, req)
	if err != nil {
		t.Errorf("kfake direct: %v", err)
		s.direct[node] = dialRaw(t, s.e.nodes[node])
	}
	return resp
}

var cmpOpts = cmp.Options{
	cmpopts.IgnoreUnexported(kmsg.Tags{}),
	// Record bytes compared whole (element-wise reflection is slow), null
	// and empty kept apart as they are on the wire.
	cmp.Comparer(func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }),
}

// diff fails when the proxy's answer differs from kfake's.
func diff(t *testing.T, what string, viaProxy, direct any) {
	t.Helper()
	if d := cmp.Diff(direct, viaProxy, cmpOpts); d != "" {
		t.Errorf("%s: the proxy's answer differs from kfake's (-kfake +proxy):\n%s", what, d)
	}
}

func (s *sweep) leader(p int32) int32 { return s.e.fake.LeaderFor(s.topic, p) }

func (s *sweep) produce(t *testing.T, v int16) {
	mk := func(value string) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = s.topic, s.id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, recordBatch(value)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	value := fmt.Sprintf("proxy-v%d", v)
	pr, _ := s.viaProxy(t, mk(value)).(*kmsg.ProduceResponse)
	dr, _ := s.viaKfake(t, s.leader(0), mk(fmt.Sprintf("direct-v%d", v))).(*kmsg.ProduceResponse)
	if pr == nil || dr == nil {
		return
	}
	pp, okP := onlyProduced(pr)
	dp, okD := onlyProduced(dr)
	if !okP || !okD {
		t.Errorf("Produce v%d: want one topic with one partition; via proxy %+v, kfake direct %+v", v, pr.Topics, dr.Topics)
		return
	}
	if pp.ErrorCode != 0 {
		t.Errorf("Produce v%d through the proxy: error %d (kfake direct: %d)", v, pp.ErrorCode, dp.ErrorCode)
		return
	}
	s.acked[pp.BaseOffset] = value
	if dp.BaseOffset != pp.BaseOffset+1 {
		t.Errorf("Produce v%d: the proxy acknowledged offset %d, the next direct produce got %d: want consecutive offsets", v, pp.BaseOffset, dp.BaseOffset)
	}
	pp.BaseOffset, dp.BaseOffset = 0, 0
	diff(t, fmt.Sprintf("Produce v%d", v), pr, dr)
}

func onlyProduced(r *kmsg.ProduceResponse) (*kmsg.ProduceResponseTopicPartition, bool) {
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return nil, false
	}
	return &r.Topics[0].Partitions[0], true
}

// checkProduced reads partition 0 from kfake and checks that every produce
// the proxy acknowledged is there.
func (s *sweep) checkProduced(t *testing.T) {
	if len(s.acked) == 0 {
		t.Errorf("no produce through the proxy was acknowledged")
		return
	}
	cl := newKgo(t, s.e.fake.ListenAddrs(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		s.topic: {0: kgo.NewOffset().AtStart()},
	}), kgo.FetchMaxWait(200*time.Millisecond))
	end := slices.Max(slices.Collect(func(yield func(int64) bool) {
		for o := range s.acked {
			if !yield(o) {
				return
			}
		}
	}))
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		done := false
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got[r.Offset] = string(r.Value)
			done = done || r.Offset >= end
		})
		if done {
			break
		}
	}
	for off, want := range s.acked {
		if got[off] != want {
			t.Errorf("partition 0 offset %d holds %q; the proxy acknowledged %q there", off, got[off], want)
		}
	}
}

func (s *sweep) fetchRequest(v int16, sessionEpoch int32, parts ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = v, -1, 100, 1, 1<<20
	req.SessionID, req.SessionEpoch = 0, sessionEpoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = s.topic, s.id
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = p, -1, 0, -1, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func (s *sweep) fetch(t *testing.T, v int16) {
	// Per partition: the proxy's answer and kfake's leader's agree.
	direct := map[int32]kmsg.FetchResponseTopicPartition{}
	for p := range s.parts {
		pr, _ := s.viaProxy(t, s.fetchRequest(v, -1, p)).(*kmsg.FetchResponse)
		dr, _ := s.viaKfake(t, s.leader(p), s.fetchRequest(v, -1, p)).(*kmsg.FetchResponse)
		if pr == nil || dr == nil {
			return
		}
		pr.ThrottleMillis, dr.ThrottleMillis = 0, 0
		diff(t, fmt.Sprintf("Fetch v%d of partition %d", v, p), pr, dr)
		if len(dr.Topics) == 1 && len(dr.Topics[0].Partitions) == 1 {
			direct[p] = dr.Topics[0].Partitions[0]
			if len(direct[p].RecordBatches) == 0 {
				t.Errorf("Fetch v%d: kfake returned no records for partition %d: the comparison proves little", v, p)
			}
		}
	}
	// All partitions at once: the proxy splits, merges, and may leave out
	// partitions still long-polling; those it includes must match.
	if pr, _ := s.viaProxy(t, s.fetchRequest(v, -1, 0, 1, 2)).(*kmsg.FetchResponse); pr != nil {
		n := 0
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				n++
				diff(t, fmt.Sprintf("Fetch v%d of partitions 0-2, partition %d", v, rp.Partition), rp, direct[rp.Partition])
			}
		}
		if n == 0 {
			t.Errorf("Fetch v%d of partitions 0-2 through the proxy answered no partition", v)
		}
	}
	if v < 7 {
		return
	}
	// A client opening a fetch session gets none (session id 0): the proxy
	// cannot share one session across brokers.
	if pr, _ := s.viaProxy(t, s.fetchRequest(v, 0, 0)).(*kmsg.FetchResponse); pr != nil {
		if pr.ErrorCode != 0 || pr.SessionID != 0 {
			t.Errorf("Fetch v%d opening a session through the proxy: error %d, session id %d; want 0 and 0", v, pr.ErrorCode, pr.SessionID)
		}
		if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 || pr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("Fetch v%d opening a session through the proxy: want partition 0 without error, got %+v", v, pr.Topics)
		}
	}
}

func (s *sweep) listOffsets(t *testing.T, v int16) {
	stamps := []int64{-2, -1}
	if v >= 1 {
		stamps = append(stamps, 0, time.Now().Add(time.Hour).UnixMilli())
	}
	if v >= 7 {
		stamps = append(stamps, -3)
	}
	mk := func(v int16, ts int64, parts ...int32) *kmsg.ListOffsetsRequest {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID, req.TimeoutMillis = v, -1, 5000
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = s.topic
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp, rp.MaxNumOffsets = p, -1, ts, 1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	for _, ts := range stamps {
		pr, _ := s.viaProxy(t, mk(v, ts, 0, 1, 2)).(*kmsg.ListOffsetsResponse)
		if pr == nil {
			return
		}
		if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != int(s.parts) {
			t.Errorf("ListOffsets v%d at %d through the proxy: want 1 topic with %d partitions, got %+v", v, ts, s.parts, pr.Topics)
			continue
		}
		for i, got := range pr.Topics[0].Partitions {
			p := int32(i)
			dr, _ := s.viaKfake(t, s.leader(p), mk(min(v, s.kmax[kmsg.ListOffsets]), ts, p)).(*kmsg.ListOffsetsResponse)
			if dr == nil || len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 {
				t.Errorf("ListOffsets v%d at %d of partition %d from kfake: unexpected shape", v, ts, p)
				continue
			}
			diff(t, fmt.Sprintf("ListOffsets v%d at %d, partition %d", v, ts, p), got, dr.Topics[0].Partitions[0])
		}
	}
}

func (s *sweep) metadata(t *testing.T, v int16) {
	named := func(names ...string) *kmsg.MetadataRequest {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	reqs := map[string]*kmsg.MetadataRequest{"named topics": named(s.topic, "raw-missing")}
	all := named()
	if v >= 1 {
		all.Topics = nil // v0 asks for all topics with an empty list
	}
	reqs["all topics"] = all
	if v >= 12 {
		byID := named()
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = s.id
		byID.Topics = append(byID.Topics, rt)
		reqs["topic by id"] = byID
	}
	for what, req := range reqs {
		pr, _ := s.viaProxy(t, req).(*kmsg.MetadataResponse)
		ref := req
		if v == 0 && what == "all topics" {
			// In v0 an empty topic list means every topic; kfake answers
			// none, so the reference is its v1 answer (null list).
			ref = named()
			ref.Version, ref.Topics = 1, nil
		}
		dr, _ := s.viaKfake(t, 0, ref).(*kmsg.MetadataResponse)
		if pr == nil || dr == nil {
			continue
		}
		diff(t, fmt.Sprintf("Metadata v%d, %s", v, what), comparableMetadata(pr), comparableMetadata(dr))
		if what == "named topics" && (len(dr.Topics) != 2 || len(dr.Topics[0].Partitions) != int(s.parts)) {
			t.Errorf("Metadata v%d from kfake: unexpected shape %+v: the comparison proves little", v, dr.Topics)
		}
	}
}

// comparableMetadata keeps what the proxy must agree with kfake on: topics,
// ids, errors, partition counts and leader epochs. Brokers, leaders and
// replicas name the proxy by design.
func comparableMetadata(r *kmsg.MetadataResponse) []kmsg.MetadataResponseTopic {
	topics := slices.Clone(r.Topics)
	for i := range topics {
		tp := &topics[i]
		tp.Partitions = slices.Clone(tp.Partitions)
		for j := range tp.Partitions {
			p := &tp.Partitions[j]
			p.Leader, p.Replicas, p.ISR, p.OfflineReplicas = 0, nil, nil, nil
		}
		// kfake lists partitions in map order.
		slices.SortFunc(tp.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	}
	slices.SortFunc(topics, func(a, b kmsg.MetadataResponseTopic) int {
		return strings.Compare(deref(a.Topic), deref(b.Topic))
	})
	return topics
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
