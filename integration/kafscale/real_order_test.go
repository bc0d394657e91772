package kafscale

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// TestRealProducePerPartition: in KafScale mode kproxy sends each
// partition of a Produce on a connection of its own (KafScale's broker
// uploads a request's partitions one after another), and one producer's
// records still land in each partition in the order it produced them,
// with up to five requests of it in flight.
func TestRealProducePerPartition(t *testing.T) {
	const topic, parts, n = "real-order", 4, 2000
	e := newRealEnv(t, map[string]int32{topic: parts})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := e.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce through kproxy: %v", firstErr)
	}
	// One client connection: without per-partition sub-requests it would
	// have one on-demand connection per broker, two in all.
	conns, err := testrig.ScrapeCounter(ctx, e.kp.AdminAddr(), "kproxy_upstream_on_demand_connections")
	if err != nil {
		t.Fatal(err)
	}
	if conns < parts {
		t.Errorf("%.0f on-demand upstream connections after one producer wrote %d partitions, want one per partition (at least %d)", conns, parts, parts)
	}

	rd := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	last := map[int32]int{}
	got := 0
	for ctx.Err() == nil && got < n {
		fs := rd.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			got++
			v, err := strconv.Atoi(string(r.Value))
			if err != nil || v%parts != int(r.Partition) {
				t.Fatalf("partition %d offset %d holds %q, not a value produced to it", r.Partition, r.Offset, r.Value)
			}
			if prev, ok := last[r.Partition]; ok && v <= prev {
				t.Fatalf("partition %d offset %d holds record %d after record %d: out of the order produced", r.Partition, r.Offset, v, prev)
			}
			last[r.Partition] = v
		})
	}
	if got != n {
		t.Fatalf("consumed %d of %d records through kproxy within the deadline", got, n)
	}
}
