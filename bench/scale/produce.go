package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// HangSlack is how long past the delivery timeout ProduceEach waits for the
// last answers before it calls the producer hung: a batch in flight when
// its records expire is answered only when its request ends (kgo's produce
// request timeout and its overhead are 10 s each by default).
const HangSlack = 30 * time.Second

// Ack is one acknowledged record: where it was written and what it holds.
type Ack struct {
	Partition int32
	Offset    int64
	Value     string
}

// Storm is what ProduceEach saw: every record is acknowledged, failed, or
// unanswered when the wait ended.
type Storm struct {
	Records    int
	Acked      []Ack
	Failed     int
	FirstErr   error // the first failure's
	Unanswered int
	Took       time.Duration // until the last answer, or until the wait ended
	Slowest    time.Duration // the longest wait for one answer
}

// Err is nil when every record was acknowledged; otherwise it says how many
// were not, and why.
func (s Storm) Err() error {
	if s.Unanswered > 0 {
		return fmt.Errorf("the producer hangs: %d of %d records unanswered %s after they were sent (delivery timeout + %s; %d acknowledged, %d failed)",
			s.Unanswered, s.Records, s.Took.Round(time.Millisecond), HangSlack, len(s.Acked), s.Failed)
	}
	if s.Failed > 0 {
		return fmt.Errorf("%d of %d records failed, first: %w", s.Failed, s.Records, s.FirstErr)
	}
	return nil
}

// ProduceEach produces one record to every partition in parts of topic
// through seeds, all at once (the cold-start storm: every partition is
// acquired together), and waits until each is answered, but no longer than
// the delivery timeout plus HangSlack: records still unanswered then are
// Storm.Unanswered, not a wait without end. The record for partition p holds
// "scale-<p>". The error is for a producer that could not start or a ctx
// that ended; the records' own outcomes are in the Storm.
func ProduceEach(ctx context.Context, seeds []string, topic string, parts []int32, delivery time.Duration) (Storm, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(delivery), kgo.MaxBufferedRecords(len(parts)+1),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return Storm{}, fmt.Errorf("producer: %w", err)
	}
	defer cl.Close() // fails what is still buffered; over keeps those out
	var mu sync.Mutex
	s := Storm{Records: len(parts)}
	left, over := len(parts), false
	all := make(chan struct{})
	if left == 0 {
		close(all)
	}
	start := time.Now()
	for _, p := range parts {
		sent := time.Now()
		rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("scale-%d", p))}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if over {
				return
			}
			s.Slowest = max(s.Slowest, time.Since(sent))
			if err != nil {
				s.Failed++
				if s.FirstErr == nil {
					s.FirstErr = err
				}
			} else {
				s.Acked = append(s.Acked, Ack{r.Partition, r.Offset, string(r.Value)})
			}
			if left--; left == 0 {
				close(all)
			}
		})
	}
	bound := time.NewTimer(delivery + HangSlack)
	defer bound.Stop()
	var waitErr error
	select {
	case <-all:
	case <-bound.C:
	case <-ctx.Done():
		waitErr = fmt.Errorf("produce to %d partitions of %s: %w", len(parts), topic, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock() // before cl.Close: its failures take mu
	over = true
	s.Unanswered, s.Took = left, time.Since(start)
	if left > 0 {
		s.Slowest = max(s.Slowest, s.Took)
	}
	return s, waitErr
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

// AllParts is partitions 0 to n-1.
func AllParts(n int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
