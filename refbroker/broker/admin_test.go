package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

func createTopicsRaw(ctx context.Context, t *testing.T, cl kmsg.Requestor, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) []kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics, req.ValidateOnly = topics, validateOnly
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topics: %v", err)
	}
	return resp.Topics
}

func newTopic(name string, partitions int32) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	return rt
}

func TestCreateTopicsValidation(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.DefaultPartitions = 5 })
	cl := c.clientFor([]string{b.Addr()})
	ctx := testCtx(t, 30*time.Second)
	cases := []struct {
		name     string
		topic    kmsg.CreateTopicsRequestTopic
		validate bool
		want     int16
	}{
		{"ok", newTopic("a.b_c-1", 2), false, 0},
		{"exists", newTopic("a.b_c-1", 2), false, kerr.TopicAlreadyExists.Code},
		{"default partitions", newTopic("dflt", -1), false, 0},
		{"zero partitions", newTopic("zero", 0), false, kerr.InvalidPartitions.Code},
		{"more partitions than the contract allows", newTopic("huge", layout.MaxPartitions+1), false, kerr.InvalidPartitions.Code},
		{"illegal character", newTopic("a/b", 1), false, kerr.InvalidTopicException.Code},
		{"dot", newTopic(".", 1), false, kerr.InvalidTopicException.Code},
		{"too long", newTopic(strings.Repeat("x", 250), 1), false, kerr.InvalidTopicException.Code},
		{"longest", newTopic(strings.Repeat("y", 249), 1), false, 0},
		{"validate only", newTopic("notreally", 1), true, 0},
	}
	for _, tc := range cases {
		got := createTopicsRaw(ctx, t, direct(cl, b), tc.validate, tc.topic)[0]
		if got.ErrorCode != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.want))
		}
	}
	if tm, ok := b.meta.topic("dflt"); !ok || tm.info.Partitions != 5 {
		t.Errorf("topic with default partitions: %+v %v, want 5 partitions", tm.info, ok)
	}
	if _, ok := b.meta.topic("notreally"); ok {
		t.Error("validate-only request created the topic")
	}
}

func TestTopicLifecycle(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.AutoCreateTopics = false })
	cl := c.clientFor([]string{b.Addr()})
	ctx := testCtx(t, 30*time.Second)
	c.createTopic(cl, "life", 1)
	if rp := produceUntilLeader(ctx, t, direct(cl, b), "life", 0, oneRecord("x")); rp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
	}

	// Grow to 3 partitions; shrinking is refused.
	for _, tc := range []struct {
		count int32
		want  int16
	}{{3, 0}, {2, kerr.InvalidPartitions.Code}, {layout.MaxPartitions + 1, kerr.InvalidPartitions.Code}} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "life", tc.count
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, direct(cl, b))
		if err != nil || resp.Topics[0].ErrorCode != tc.want {
			t.Fatalf("create partitions to %d: %v %+v", tc.count, err, resp)
		}
	}
	if rp := produceUntilLeader(ctx, t, direct(cl, b), "life", 2, oneRecord("y")); rp.ErrorCode != 0 {
		t.Fatalf("produce to new partition: %v", kerr.ErrorForCode(rp.ErrorCode))
	}

	// Configs.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "life"
	dc.Resources = append(dc.Resources, dr)
	dresp, err := dc.RequestWith(ctx, direct(cl, b))
	if err != nil || dresp.Resources[0].ErrorCode != 0 || len(dresp.Resources[0].Configs) == 0 {
		t.Fatalf("describe configs: %v %+v", err, dresp)
	}

	// Delete: the topic and its data are gone.
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("life")
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{"life"}
	delResp, err := del.RequestWith(ctx, direct(cl, b))
	if err != nil || delResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete topic: %v %+v", err, delResp)
	}
	if rp := produceRaw(ctx, t, direct(cl, b), "life", 0, -1, oneRecord("z")); rp.ErrorCode == 0 {
		t.Fatal("produce to a deleted topic succeeded")
	}
	objs, err := c.store.List(ctx, "segments/life/")
	if err != nil || len(objs) != 0 {
		t.Fatalf("objects of deleted topic: %v %v", objs, err)
	}
	keys, err := c.admin.Get(ctx, schema.New(c.layout).LogPrefix()+"life/", clientv3WithPrefix())
	if err != nil || len(keys.Kvs) != 0 {
		t.Fatalf("log keys of deleted topic: %d %v", len(keys.Kvs), err)
	}
}

func TestDeleteRecordsAndGC(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.GCGrace = time.Nanosecond })
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "trim", 1)
	ctx := testCtx(t, 30*time.Second)
	for range 4 {
		if rp := produceUntilLeader(ctx, t, direct(cl, b), "trim", 0, oneRecord("x")); rp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	// An unreferenced object, as a refused commit leaves behind.
	tp := partlog.TP{Topic: "trim", Partition: 0}
	if err := c.store.PutIfAbsent(ctx, partlog.SegmentPrefix(tp)+"orphan", []byte("x")); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "trim"
	rt.Partitions = []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 2}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, direct(cl, b))
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].LowWatermark != 2 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
	if start, _ := listOffset(ctx, t, direct(cl, b), "trim", 0, -2); start != 2 {
		t.Fatalf("log start after delete records: %d, want 2", start)
	}
	if p := fetchRaw(ctx, t, direct(cl, b), "trim", 0, 1); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below log start: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if recs := readFrom(ctx, t, direct(cl, b), "trim", 2); len(recs) != 2 {
		t.Fatalf("records after log start: %d, want 2", len(recs))
	}
	before, _ := c.store.List(ctx, partlog.SegmentPrefix(tp))
	n, err := b.collectPartition(ctx, tp)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	after, _ := c.store.List(ctx, partlog.SegmentPrefix(tp))
	// One segment per record: two trimmed plus the orphan go, two stay.
	if n != 3 || len(before) != 5 || len(after) != 2 {
		t.Fatalf("gc deleted %d objects (%d before, %d after), want 3 (5, 2)", n, len(before), len(after))
	}
	if recs := readFrom(ctx, t, direct(cl, b), "trim", 2); len(recs) != 2 {
		t.Fatalf("records after gc: %d, want 2", len(recs))
	}
}

func TestMetricsCount(t *testing.T) {
	c := newCluster(t)
	reg := prometheus.NewRegistry()
	b := c.start(1, func(cfg *Config) { cfg.Registerer, cfg.Rack = reg, "r1" })
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "m", 1)
	ctx := testCtx(t, 30*time.Second)
	for range 3 {
		if rp := produceUntilLeader(ctx, t, direct(cl, b), "m", 0, oneRecord("x")); rp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	fetchRaw(ctx, t, direct(cl, b), "m", 0, 0)
	for name, want := range map[string]float64{
		"kproxy_broker_produce_requests_total": 3,
		"kproxy_broker_commits_total":          3,
		"kproxy_broker_acquisitions_total":     1,
		"kproxy_broker_fetch_requests_total":   1,
		// exported at 0 before any refusal
		"kproxy_broker_acquisitions_refused_total": 0,
	} {
		if got := gatherValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Record bytes served, by the fetch's RackID against the broker's rack.
	served := fetchRaw(ctx, t, direct(cl, b), "m", 0, 0) // no RackID: unknown
	if got := testutil.ToFloat64(b.metrics.fetchBytes.WithLabelValues("unknown")); got != float64(2*len(served.RecordBatches)) || got == 0 {
		t.Errorf("fetch bytes without a rack: %v, want twice %d", got, len(served.RecordBatches))
	}
	if got := testutil.ToFloat64(b.metrics.fetchBytes.WithLabelValues("false")); got != 0 {
		t.Errorf("cross-rack fetch bytes %v, want 0", got)
	}
	if n := testutil.CollectAndCount(reg, "kproxy_broker_commit_seconds"); n != 1 {
		t.Errorf("commit latency histogram: %d series", n)
	}
}

func gatherValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			total := 0.0
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
			return total
		}
	}
	return -1
}
