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
// with up to five requests of it in flight; with acks=0 too, whose
// requests no answer orders, behind barriers (proxy/upstream/confirm.go).
func TestRealProducePerPartition(t *testing.T) {
	for _, tc := range []struct {
		name string
		acks kgo.Acks
	}{
		{"acks-all", kgo.AllISRAcks()},
		{"acks-0", kgo.NoAck()},
	} {
		t.Run(tc.name, func(t *testing.T) { producePerPartition(t, "real-order-"+tc.name, tc.acks) })
	}
}

func producePerPartition(t *testing.T, topic string, acks kgo.Acks) {
	const parts, n = 4, 2000
	e := newRealEnv(t, map[string]int32{topic: parts})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acksZero := acks == kgo.NoAck()
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if acksZero {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := e.client(opts...)
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
	want := n
	if acksZero {
		// KafScale flushes a partition's buffer on an acknowledged write (or
		// an append after its flush interval), and a buffered tail stays
		// invisible to fetches: one acks=all record per partition, last in
		// its order (value n+p), brings the acks=0 records out.
		flush := e.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for p := range int32(parts) {
			if err := flush.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(n + int(p)))}).FirstErr(); err != nil {
				t.Fatalf("acks=all record to partition %d after the acks=0 ones: %v", p, err)
			}
		}
		want += parts
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
	barriers, err := testrig.ScrapeCounter(ctx, e.kp.AdminAddr(), "kproxy_upstream_barriers_total")
	if err != nil {
		t.Fatal(err)
	}
	if (barriers > 0) != acksZero {
		t.Errorf("%.0f barriers behind acks=0 produces, with acks=0 %v", barriers, acksZero)
	}

	rd := e.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	last := map[int32]int{}
	got := 0
	for ctx.Err() == nil && got < want {
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
	if got != want {
		t.Fatalf("consumed %d of %d records through kproxy within the deadline", got, want)
	}
}
