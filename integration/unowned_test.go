package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
)

// TestNoHangWhenOwnerVanishes replays issue 11's hang in small: a partition
// kgo has produced to is taken, under a lease, by a broker that is not live
// (as when every broker's session expired at once and another grabbed
// keys it could not serve), so produces are refused until kgo gives up on
// them; then the stray key goes and the partition is free again. kgo must
// get an answer for every record within its delivery timeout, and produce
// again once the partition is free. It used to see leader epoch -1 for the
// ownerless partition, which kgo reads as "no leader yet, keep the old one
// and wait": it never produced again, so nothing re-acquired the partition
// and records waited forever.
func TestNoHangWhenOwnerVanishes(t *testing.T) {
	const topic, delivery = "vanish", 8 * time.Second
	c := devtest.Start(t, devcluster.Config{Brokers: 1, AutoCreateTopics: true, DefaultPartitions: 1, LeaseTTL: 2 * time.Second})
	cl := newClient(t, c.ProxyAddrs()[0], kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(delivery), kgo.ProduceRequestTimeout(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).First(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	// kgo learns the owner's epoch, as any client does on a refresh.
	for _, epoch, _ := cl.PartitionLeader(topic, 0); epoch < 1; _, epoch, _ = cl.PartitionLeader(topic, 0) {
		cl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			t.Fatalf("kgo never saw the partition's epoch (has %d)", epoch)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The partition's owner vanishes and a broker that is not live takes it.
	release, err := c.StrandPartition(ctx, topic, 0, 99, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Every record gets an answer within its delivery timeout (plus slack
	// for a produce already in flight); waiting on the promise, not on a
	// context kgo does not consult while the partition waits for metadata.
	answered := func(what string) error {
		t.Helper()
		start := time.Now()
		limit := delivery + 10*time.Second
		done := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Value: []byte(what)}, func(_ *kgo.Record, err error) { done <- err })
		select {
		case err := <-done:
			t.Logf("produce %s: %v after %v", what, err, time.Since(start))
			return err
		case <-time.After(limit):
			t.Fatalf("produce %s: no answer after %v (delivery timeout %v): the client hangs", what, limit, delivery)
			return nil
		}
	}
	answered("while a dead broker holds the partition")
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	waitUnowned(ctx, t, c, topic)
	for i := range 3 {
		if answered(fmt.Sprintf("after the partition is free (%d)", i)) == nil {
			return
		}
	}
	t.Fatal("no produce succeeded after the partition was free, though the broker is up")
}

func waitUnowned(ctx context.Context, t *testing.T, c *devcluster.Cluster, topic string) {
	t.Helper()
	for {
		if _, owned, err := c.Owner(ctx, topic, 0); err == nil && !owned {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("owner key still present")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
