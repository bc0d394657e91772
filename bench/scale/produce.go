package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceEach produces one record to every partition in parts of topic
// through seeds, and waits until each is acknowledged or failed; the
// client's delivery timeout bounds the wait, so it never hangs.
func produceEach(ctx context.Context, seeds []string, topic string, parts []int32, timeout time.Duration) (time.Duration, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(timeout), kgo.MaxBufferedRecords(len(parts)+1),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, 0, fmt.Errorf("producer: %w", err)
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Value
	start := time.Now()
	for _, p := range parts {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("scale")}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				first.CompareAndSwap(nil, err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if e, _ := first.Load().(error); e != nil {
		return took, int(failed.Load()), fmt.Errorf("%d of %d records failed, first: %w", failed.Load(), len(parts), e)
	}
	return took, 0, nil
}

// metadataLatency times n Metadata requests for every topic against addr.
func metadataLatency(ctx context.Context, addr string, n int) ([]time.Duration, int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	var out []time.Duration
	parts := 0
	for range n {
		req := kmsg.NewPtrMetadataRequest() // no topics named: all of them
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		start := time.Now()
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			return out, parts, fmt.Errorf("metadata from %s: %w", addr, err)
		}
		out = append(out, time.Since(start))
		parts = 0
		for _, t := range resp.Topics {
			parts += len(t.Partitions)
		}
	}
	return out, parts, nil
}

func allParts(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
