package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
)

// A kgo idempotent producer and a kgo consumer keep going while the owner
// of a partition crashes: the producer finishes without errors, nothing is
// stored twice, and the consumer reads every acknowledged record in order.
func TestKgoSurvivesOwnerCrash(t *testing.T) {
	c := newCluster(t)
	for id := int32(1); id <= 3; id++ {
		c.start(id, nil)
	}
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	c.createTopic(prod, "kf", 2)
	ctx := testCtx(t, 90*time.Second)

	const n = 600
	var mu sync.Mutex
	acked := make(map[string]int64)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := range n {
			if i == n/3 {
				owner := c.ownerOf(ctx, t, "kf", 0)
				t.Logf("crashing broker %d, owner of kf/0", owner)
				c.crash(owner)
			}
			r := &kgo.Record{Topic: "kf", Partition: int32(i % 2), Value: recordValue(i)}
			prod.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", r.Value, err)
					return
				}
				mu.Lock()
				acked[string(r.Value)] = r.Offset
				mu.Unlock()
			})
			if i%50 == 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err := prod.Flush(ctx); err != nil {
			t.Errorf("flush: %v", err)
		}
	}()
	<-produced
	if t.Failed() {
		t.FailNow()
	}
	recs := consumeN(t, c, "kf", n)
	next := map[int32]int64{}
	seen := make(map[string]bool)
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		if seen[string(r.Value)] {
			t.Fatalf("record %s stored twice", r.Value)
		}
		seen[string(r.Value)] = true
		if off, ok := acked[string(r.Value)]; ok && off != r.Offset {
			t.Fatalf("record %s acknowledged at %d, stored at %d", r.Value, off, r.Offset)
		}
	}
	if len(acked) != n {
		t.Fatalf("%d of %d records acknowledged", len(acked), n)
	}
}

// ownerOf reads a partition's owner from etcd, waiting until there is one.
func (c *cluster) ownerOf(ctx context.Context, t *testing.T, topic string, p int32) int32 {
	t.Helper()
	for {
		resp, err := c.admin.Get(ctx, c.layout.OwnerKey(topic, p))
		if err != nil {
			t.Fatalf("read owner: %v", err)
		}
		if len(resp.Kvs) > 0 {
			var o layout.Owner
			if err := layout.Unmarshal(resp.Kvs[0].Value, &o); err != nil {
				t.Fatal(err)
			}
			return o.Broker
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s/%d has no owner", topic, p)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Committed offsets survive the crash of the group's coordinator: the next
// coordinator reads them from the group state.
func TestGroupOffsetsSurviveCoordinatorCrash(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "t", 1)
	ctx := testCtx(t, 60*time.Second)
	if code := commitOffset(ctx, t, direct(cl, b1), "gc", "", -1, 42); code != 0 {
		t.Fatalf("commit: %v", code)
	}
	// Broker 2 is not the coordinator while broker 1 holds the group.
	if code := commitOffset(ctx, t, direct(cl, b2), "gc", "", -1, 43); code != 16 { // NOT_COORDINATOR
		t.Fatalf("commit on non-coordinator: code %d, want NOT_COORDINATOR", code)
	}
	c.crash(1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "gc"
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, direct(cl, b2))
		if err != nil {
			t.Fatal(err)
		}
		if g := resp.Groups[0]; g.ErrorCode == 0 {
			if len(g.Topics) != 1 || g.Topics[0].Partitions[0].Offset != 42 {
				t.Fatalf("offsets after coordinator crash: %+v, want t/0 at 42", g.Topics)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 never became coordinator: %+v", resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A coordinator whose ownership is taken from it behind its back cannot
// commit offsets any more: the fenced commit is refused, it answers
// NOT_COORDINATOR and drops the group; committed offsets stay intact.
func TestGroupCommitIsFenced(t *testing.T) {
	c := newCluster(t)
	b1 := c.start(1, nil)
	cl := c.clientFor([]string{b1.Addr()})
	c.createTopic(cl, "t", 1)
	ctx := testCtx(t, 30*time.Second)
	bc := direct(cl, b1)
	if code := commitOffset(ctx, t, bc, "fg", "", -1, 10); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if _, err := c.admin.Delete(ctx, c.layout.CoordinatorKey("fg")); err != nil {
		t.Fatal(err)
	}
	if code := commitOffset(ctx, t, bc, "fg", "", -1, 11); code != 16 { // NOT_COORDINATOR
		t.Fatalf("commit after losing the coordinator key: code %d, want NOT_COORDINATOR", code)
	}
	// The next request acquires the group again and sees the committed offset.
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "fg"
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, bc)
	if err != nil || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].Topics[0].Partitions[0].Offset != 10 {
		t.Fatalf("offsets after re-acquisition: %v %+v", err, resp)
	}
}
