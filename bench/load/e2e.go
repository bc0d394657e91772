package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// E2EConfig describes an end-to-end latency run: a rate-limited producer
// writes stamped records to some partitions while one consumer reads every
// partition of the topic from its end. With the written partitions on some
// brokers only, the consumer's fetch also covers idle brokers: a proxy that
// merges one fetch over all brokers must answer as soon as any has data,
// not after the idle brokers' MaxWait.
type E2EConfig struct {
	Target     Target
	Topic      string
	RecordSize int
	Partitions []int32 // written partitions; empty means all
	Rate       float64 // records/s
	Warmup     time.Duration
	Duration   time.Duration
	// Grace is how long after the window the consumer waits for records
	// still on their way; records not seen by then are counted at Grace
	// past the window end (default 10 s, twice kgo's fetch MaxWait).
	Grace  time.Duration
	Logger *slog.Logger
}

// E2E runs the producer and the consumer and reports the consumer's view:
// records and bytes received that were sent in the window, and their
// latency from intended send time to receipt.
func E2E(ctx context.Context, cfg E2EConfig) (Result, error) {
	if len(cfg.Target.Seeds) == 0 || cfg.Topic == "" || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return Result{}, errors.New("e2e: need seeds, topic, a rate and a positive duration")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	cl, err := e2eConsumer(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()

	start := time.Now()
	winStart, winEnd := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	type produced struct {
		res Result
		err error
	}
	prodDone := make(chan produced, 1)
	go func() {
		res, err := Produce(ctx, ProduceConfig{
			Target: cfg.Target, Topic: cfg.Topic, RecordSize: max(cfg.RecordSize, 8),
			Partitions: cfg.Partitions, Producers: 1, Acks: "all", Rate: cfg.Rate,
			Warmup: cfg.Warmup, Duration: cfg.Duration, Linger: -1, Stamp: true, Logger: cfg.Logger,
		})
		prodDone <- produced{res, err}
	}()

	rec := newRecorder()
	win := e2eWindow{start: winStart, end: winEnd, rec: rec}
	expected := int64(-1) // known once the producer has finished
	deadline := winEnd.Add(cfg.Grace)
	pollCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for pollCtx.Err() == nil && (expected < 0 || win.got < expected) {
		select {
		case p := <-prodDone:
			if p.err != nil {
				return Result{}, fmt.Errorf("e2e producer: %w", p.err)
			}
			expected = p.res.Latency.Count
			if p.res.Errors > 0 {
				rec.fail(fmt.Errorf("producer: %d errors, first: %s", p.res.Errors, p.res.FirstError))
			}
			continue
		default:
		}
		// Short polls so that the producer's end is noticed promptly.
		short, cancelShort := context.WithTimeout(pollCtx, 100*time.Millisecond)
		fs := cl.PollFetches(short)
		cancelShort()
		win.absorb(fs, time.Now())
	}
	got, bytes := win.got, win.bytes
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("e2e run interrupted: %w", err)
	}
	if expected < 0 {
		p := <-prodDone
		if p.err != nil {
			return Result{}, fmt.Errorf("e2e producer: %w", p.err)
		}
		expected = p.res.Latency.Count
	}
	for missing := expected - got; missing > 0; missing-- {
		rec.record(cfg.Grace) // a lower bound: it never arrived
	}
	if got < expected {
		rec.fail(fmt.Errorf("%d of %d records not received within %s after the window", expected-got, expected, cfg.Grace))
	}
	res := Result{Kind: "e2e", Records: got, Bytes: bytes}
	if err := res.finish(rec.into(&res), cfg.Duration); err != nil {
		return Result{}, err
	}
	return res, nil
}

// e2eConsumer reads cfg.Topic's partitions from their current ends, so it
// sees only the records the run produces.
func e2eConsumer(ctx context.Context, cfg E2EConfig) (*kgo.Client, error) {
	ends, err := topicEnds(ctx, cfg.Target, cfg.Topic, cfg.Logger)
	if err != nil {
		return nil, err
	}
	from := make(map[int32]kgo.Offset, len(ends))
	for p, end := range ends {
		from[p] = kgo.NewOffset().At(end)
	}
	cl, err := kgo.NewClient(append(cfg.Target.options(cfg.Logger),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: from}))...)
	if err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	return cl, nil
}

// e2eWindow counts the records stamped within [start, end) as they are
// consumed, recording each one's latency from its stamp.
type e2eWindow struct {
	start, end time.Time
	rec        *recorder
	got, bytes int64
}

// absorb takes one poll's fetches, consumed at now.
func (w *e2eWindow) absorb(fs kgo.Fetches, now time.Time) {
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			w.rec.fail(err)
		}
	})
	fs.EachRecord(func(r *kgo.Record) {
		if len(r.Value) < 8 {
			return
		}
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
		if sent.Before(w.start) || !sent.Before(w.end) {
			return
		}
		w.got++
		w.bytes += int64(len(r.Value))
		w.rec.record(now.Sub(sent))
	})
}
