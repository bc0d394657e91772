package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeConfig describes a catch-up read: consumers read a topic from
// offset 0 up to the end offsets it had when the run started.
type ConsumeConfig struct {
	Target    Target
	Topic     string
	Consumers int // kgo clients; partitions are dealt out round-robin
	// Duration caps the run; it ends earlier once everything is read.
	Duration time.Duration
	Logger   *slog.Logger
}

// fetchHook records the round trip of every fetch request.
type fetchHook struct{ rec *recorder }

func (h fetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 1 { // Fetch
		return
	}
	if err := e2e.Err(); err != nil {
		return // a dropped connection is counted by the consumer, not here
	}
	h.rec.record(e2e.DurationE2E())
}

// Consume reads the topic back and reports records/s, MB/s and the fetch
// request round-trip time.
func Consume(ctx context.Context, cfg ConsumeConfig) (Result, error) {
	if len(cfg.Target.Seeds) == 0 || cfg.Topic == "" || cfg.Consumers <= 0 || cfg.Duration <= 0 {
		return Result{}, errors.New("consume: need seeds, topic, consumers and a positive duration")
	}
	ends, err := topicEnds(ctx, cfg.Target, cfg.Topic, cfg.Logger)
	if err != nil {
		return Result{}, err
	}
	assign := make([]map[int32]kgo.Offset, cfg.Consumers)
	var total int64
	i := 0
	for p, end := range ends {
		if end <= 0 {
			continue
		}
		if assign[i%cfg.Consumers] == nil {
			assign[i%cfg.Consumers] = make(map[int32]kgo.Offset)
		}
		assign[i%cfg.Consumers][p] = kgo.NewOffset().At(0)
		total += end
		i++
	}
	if total == 0 {
		return Result{}, fmt.Errorf("consume: topic %s is empty", cfg.Topic)
	}
	rec := newRecorder()
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var records, bytes atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for _, parts := range assign {
		if parts == nil {
			continue
		}
		opts := append(cfg.Target.options(cfg.Logger),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}),
			kgo.WithHooks(fetchHook{rec}))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			cancel()
			wg.Wait()
			return Result{}, fmt.Errorf("new consumer: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			n, b := readToEnds(runCtx, cl, ends, len(parts), rec)
			records.Add(n)
			bytes.Add(b)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("consume run interrupted: %w", err)
	}
	res := Result{Kind: "consume", Records: records.Load(), Bytes: bytes.Load()}
	if err := res.finish(rec.into(&res), elapsed); err != nil {
		return Result{}, err
	}
	if res.Records < total && runCtx.Err() == nil {
		return res, fmt.Errorf("consume: read %d of %d records", res.Records, total)
	}
	return res, nil
}

// topicEnds lists the end offset of every partition of topic.
func topicEnds(ctx context.Context, t Target, topic string, logger *slog.Logger) (map[int32]int64, error) {
	cl, err := kgo.NewClient(t.options(logger)...)
	if err != nil {
		return nil, fmt.Errorf("new admin client: %w", err)
	}
	defer cl.Close()
	n, err := Partitions(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	return EndOffsets(ctx, cl, topic, n)
}

// readToEnds polls until each of its parts partitions reached its end
// offset or ctx ends, and returns the records and value bytes read.
func readToEnds(ctx context.Context, cl *kgo.Client, ends map[int32]int64, parts int, rec *recorder) (records, bytes int64) {
	done := make(map[int32]bool, parts)
	for len(done) < parts && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				rec.fail(err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return // written after the run started
			}
			records++
			bytes += int64(len(r.Value))
			if r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return records, bytes
}
