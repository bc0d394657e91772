package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/devcluster"
	"github.com/kproxy/kproxy/internal/devcluster/devtest"
)

// scalePartitions is the partition count of TestScaleColdStart:
// KPROXY_SCALE_PARTITIONS, default 30000 (issue 11's run), 2000 under the
// race detector (see defaultScalePartitions).
func scalePartitions(t *testing.T) int32 {
	t.Helper()
	v := os.Getenv("KPROXY_SCALE_PARTITIONS")
	if v == "" {
		return defaultScalePartitions
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		t.Fatalf("KPROXY_SCALE_PARTITIONS=%q: want a positive count", v)
	}
	return int32(n)
}

// TestScaleColdStart is issue 11's 30,000-partition run in reduced form: a
// topic with that many partitions, then one keyed record for every
// partition from one kgo producer, so every partition is acquired at once
// (the storm that expired every broker's lease session and left a producer
// hanging). Every record must be answered within the delivery timeout, no
// lease session may be lost, and every acknowledged record must read back.
func TestScaleColdStart(t *testing.T) {
	if testing.Short() {
		t.Skip("acquires tens of thousands of partitions")
	}
	const topic, delivery = "scale", 90 * time.Second
	parts := scalePartitions(t)
	c := devtest.Start(t, devcluster.Config{Brokers: 3, StoreMemory: true})
	proxy := c.ProxyAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	start := time.Now()
	adm := kadm.NewClient(newClient(t, proxy))
	if _, err := adm.CreateTopic(ctx, parts, -1, nil, topic); err != nil {
		t.Fatalf("create %d partitions: %v", parts, err)
	}
	created := time.Since(start)

	cl := newClient(t, proxy, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(delivery), kgo.MaxBufferedRecords(int(parts)+1))
	produced, failed, slowest := produceEveryPartition(ctx, t, cl, parts, delivery)
	took := time.Since(start) - created
	for id, st := range c.LeaseStats() {
		t.Logf("broker %d lease: %+v", id, st)
		if st.SessionLosses != 0 {
			t.Errorf("broker %d lost its lease session %d times (%d ownerships)", id, st.SessionLosses, st.OwnershipsLost)
		}
	}
	t.Logf("%d partitions: created in %v; %d records acknowledged, %d failed, in %v (slowest answer %v)",
		parts, created, len(produced), failed, took, slowest)
	if failed > 0 {
		t.Errorf("%d of %d records failed (each within the delivery timeout)", failed, parts)
	}
	if len(produced) == 0 {
		t.Fatal("nothing acknowledged")
	}
	readStart := time.Now()
	checkSame(t, produced, consumeAll(t, proxy, topic, len(produced), 2*time.Minute))
	t.Logf("read back %d records in %v", len(produced), time.Since(readStart))
}

// produceEveryPartition sends record i to partition i and waits for every
// answer, failing the test if one is not answered within the delivery
// timeout plus one produce request's worth of slack.
func produceEveryPartition(ctx context.Context, t *testing.T, cl *kgo.Client, parts int32, delivery time.Duration) ([]record, int, time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var produced []record
	var failed int
	var slowest time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		sent := time.Now()
		rec := &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d", p)), Value: []byte(fmt.Sprintf("v%d", p))}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, time.Since(sent))
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			produced = append(produced, record{r.Partition, r.Offset, string(r.Value)})
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	limit := delivery + 30*time.Second
	select {
	case <-done:
	case <-time.After(limit):
		mu.Lock()
		n := len(produced) + failed
		mu.Unlock()
		t.Fatalf("only %d of %d records answered after %v (delivery timeout %v): the producer hangs", n, parts, limit, delivery)
	}
	if firstErr != nil {
		t.Logf("first produce error: %v", firstErr)
	}
	return produced, failed, slowest
}
