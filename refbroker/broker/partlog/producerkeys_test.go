package partlog

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
	"github.com/kproxy/kproxy/refbroker/store"
)

// newTestLogs is a Logs on a real session; tune adjusts its config.
func newTestLogs(t *testing.T, cli *clientv3.Client, l layout.Layout, broker int32, tune ...func(*Config)) (*Logs, *lease.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := lease.NewSession(ctx, lease.Config{Client: cli, Layout: l, BrokerID: broker, TTL: 2 * time.Second, SafetyMargin: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	cfg := Config{Session: sess, Etcd: cli, Layout: l, Store: store.NewMemory(), View: NewView(l, nil)}
	for _, f := range tune {
		f(&cfg)
	}
	logs := NewLogs(cfg)
	t.Cleanup(func() { logs.Close(context.Background()) })
	return logs, sess
}

func appendOne(t *testing.T, logs *Logs, tp TP, raw []byte) Result {
	t.Helper()
	batches, perr := ParseProduce(raw)
	if perr != nil {
		t.Fatal(perr.Msg)
	}
	select {
	case r := <-logs.Append(tp, batches):
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("append did not finish")
		return Result{}
	}
}

// TestCommitWritesOnlyChangedProducers: with many idempotent producers
// remembered, a commit rewrites the partition state (small, no producers)
// and the one producer that wrote, not the others; a new owner reads every
// producer back and still recognises a duplicate. Before, the state carried
// every producer and each commit rewrote all of them.
func TestCommitWritesOnlyChangedProducers(t *testing.T) {
	_, cli := etcdtest.Start(t)
	l := layout.New("/prodkeys")
	sc := schema.New(l)
	logs, sess := newTestLogs(t, cli, l, 1)
	tp := TP{Topic: "p", Partition: 0}
	const producers = 300
	value := strings.Repeat("x", 1000)
	for pid := int64(1); pid <= producers; pid++ {
		if r := appendOne(t, logs, tp, testBatch(pid, 0, 0, 1, value)); r.Code != 0 {
			t.Fatalf("producer %d: %+v", pid, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keyOf := func(pid int64) string { return sc.ProducerKey(tp.Topic, tp.Partition, pid) }
	before, err := cli.Get(ctx, keyOf(7))
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("producer 7 key: %v %v", before, err)
	}
	// One more batch from producer 42: what does its commit write?
	raw := testBatch(42, 0, 1, 2, value)
	r := appendOne(t, logs, tp, raw)
	if r.Code != 0 {
		t.Fatalf("append: %+v", r)
	}
	state, _ := cli.Get(ctx, sc.PartitionStateKey(tp.Topic, tp.Partition))
	seg, _ := cli.Get(ctx, sc.SegmentKey(tp.Topic, tp.Partition, r.BaseOffset))
	p42, _ := cli.Get(ctx, keyOf(42))
	after, _ := cli.Get(ctx, keyOf(7))
	if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatal("producer 7 did not write, yet its key was rewritten")
	}
	if p42.Kvs[0].ModRevision != state.Kvs[0].ModRevision || seg.Kvs[0].ModRevision != state.Kvs[0].ModRevision {
		t.Fatal("producer 42's key, the segment and the state were not written in one commit")
	}
	written := len(state.Kvs[0].Key) + len(state.Kvs[0].Value) + len(seg.Kvs[0].Key) + len(seg.Kvs[0].Value) +
		len(p42.Kvs[0].Key) + len(p42.Kvs[0].Value)
	var full schema.PartitionState
	if err := layout.Unmarshal(state.Kvs[0].Value, &full); err != nil {
		t.Fatal(err)
	}
	if full.Producers != nil || full.ProducerKeys != producers {
		t.Fatalf("state holds %d inline producers and counts %d keys; want none inline, %d keys", len(full.Producers), full.ProducerKeys, producers)
	}
	old := len(layout.Marshal(withProducers(t, cli, l, tp, full))) + len(seg.Kvs[0].Key) + len(seg.Kvs[0].Value)
	perMB := func(n int) float64 { return float64(n) * float64(1<<20) / float64(len(raw)) }
	t.Logf("one commit of a %d-byte batch with %d producers remembered: %d etcd bytes written (%.0f KiB per MB produced); the inline encoding wrote %d (%.0f KiB per MB)",
		len(raw), producers, written, perMB(written)/1024, old, perMB(old)/1024)
	if written > 1024 {
		t.Fatalf("a commit wrote %d bytes to etcd with %d producers remembered; want it bounded (< 1 KiB)", written, producers)
	}

	// A new owner reads the producers back: a retry of producer 42's batch
	// is answered as the duplicate it is.
	logs.Close(ctx)
	if err := sess.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	logs2, _ := newTestLogs(t, cli, l, 2)
	if dup := appendOne(t, logs2, tp, raw); dup.Code != 0 || dup.BaseOffset != r.BaseOffset {
		t.Fatalf("retry of a committed batch under the new owner = %+v; want the duplicate at offset %d", dup, r.BaseOffset)
	}
}

// withProducers is st with every producer inline, as the old encoding
// wrote it on every commit.
func withProducers(t *testing.T, cli *clientv3.Client, l layout.Layout, tp TP, st schema.PartitionState) schema.PartitionState {
	t.Helper()
	sc := schema.New(l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, sc.ProducerPrefix(tp.Topic, tp.Partition), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	st.Producers = map[int64]schema.ProducerState{}
	for i, kv := range resp.Kvs {
		var ps schema.ProducerState
		if err := layout.Unmarshal(kv.Value, &ps); err != nil {
			t.Fatal(err)
		}
		st.Producers[int64(i)] = ps
	}
	return st
}

// TestOldInlineProducersMigrate: a state written in the old encoding (every
// producer inline) is still honoured, and its first commit moves every
// producer to its own key.
func TestOldInlineProducersMigrate(t *testing.T) {
	_, cli := etcdtest.Start(t)
	l := layout.New("/migrate")
	sc := schema.New(l)
	tp := TP{Topic: "m", Partition: 0}
	old := schema.PartitionState{End: 10, Producers: map[int64]schema.ProducerState{
		5: {Epoch: 0, Batches: []schema.ProducerBatch{{FirstSeq: 0, LastSeq: 0, BaseOffset: 9, Timestamp: time.Now().UnixMilli()}}},
		6: {Epoch: 0, Batches: []schema.ProducerBatch{{FirstSeq: 0, LastSeq: 0, BaseOffset: 8, Timestamp: time.Now().UnixMilli()}}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, sc.PartitionStateKey(tp.Topic, tp.Partition), layout.Marshal(old)); err != nil {
		t.Fatal(err)
	}
	logs, _ := newTestLogs(t, cli, l, 1)
	if dup := appendOne(t, logs, tp, testBatch(5, 0, 0, 1, "again")); dup.Code != 0 || dup.BaseOffset != 9 {
		t.Fatalf("duplicate of an inline producer's batch = %+v; want offset 9", dup)
	}
	if r := appendOne(t, logs, tp, testBatch(5, 0, 1, 2, "next")); r.Code != 0 || r.BaseOffset != 10 {
		t.Fatalf("next batch = %+v; want offset 10", r)
	}
	resp, err := cli.Get(ctx, sc.ProducerPrefix(tp.Topic, tp.Partition), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 2 {
		t.Fatalf("%v producer keys after the first commit (%v); want both producers moved to keys", resp.Count, err)
	}
	st, _ := cli.Get(ctx, sc.PartitionStateKey(tp.Topic, tp.Partition))
	var got schema.PartitionState
	if err := layout.Unmarshal(st.Kvs[0].Value, &got); err != nil || got.Producers != nil || got.ProducerKeys != 2 {
		t.Fatalf("state after migration = %+v, %v; want no inline producers and 2 keys", got, err)
	}
}
