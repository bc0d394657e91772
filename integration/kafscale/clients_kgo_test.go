package kafscale

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 6
	numRecords = 600
)

// TestKgoThroughLeaseMove: a kgo producer and a kgo group consumer run
// while the broker holding most leases is scaled down; no client sees an
// error and every acknowledged record is read back.
func TestKgoThroughLeaseMove(t *testing.T) {
	const topic, group = "orders-kgo", "kgo-group"
	e := newEnv(t, map[string]int32{topic: partitions})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	producer := e.client(kgo.DefaultProduceTopic(topic))
	consumer := e.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))

	var (
		mu      sync.Mutex
		acked   = map[string]bool{}
		errs    []error
		halfway = make(chan struct{})
		once    sync.Once
	)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range numRecords {
			rec := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
			producer.Produce(ctx, rec, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				acked[string(r.Value)] = true
				if len(acked) >= numRecords/2 {
					once.Do(func() { close(halfway) })
				}
			})
			if i == numRecords/2 {
				<-halfway // the move happens with the second half in flight
			}
			time.Sleep(time.Millisecond) // a steady stream, not one burst
		}
		if err := producer.Flush(ctx); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})

	seen := map[string]bool{}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			fs.EachError(func(tp string, p int32, err error) {
				if ctx.Err() == nil {
					t.Errorf("consumer: fetch error on %s/%d: %v", tp, p, err)
				}
			})
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			done := len(seen) >= numRecords
			mu.Unlock()
			if done {
				return
			}
		}
	}()

	select {
	case <-halfway:
	case <-ctx.Done():
		t.Fatal("the first half was not acknowledged in time")
	}
	x, n := e.busiest(ctx, topic)
	sentAtExit := e.scaleDown(ctx, x, n > 0)
	t.Logf("scaled down broker %d, which held %d of %d leases", x, n, partitions)
	wg.Wait()
	<-consumed

	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("producer saw %d errors, first: %v", len(errs), errs[0])
	}
	missing := 0
	for v := range acked {
		if !seen[v] {
			missing++
		}
	}
	if len(acked) != numRecords || missing > 0 {
		t.Errorf("acknowledged %d of %d records; %d acknowledged records not read back", len(acked), numRecords, missing)
	}
	e.checkServed(topic, x, sentAtExit)
}
