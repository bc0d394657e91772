package load

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceConfig describes a produce run.
type ProduceConfig struct {
	Target     Target
	Topic      string
	RecordSize int // value bytes per record; no key
	// Partitions, when set, are the only partitions written, round-robin
	// per producer (manual partitioner). Empty: kgo's default partitioner
	// over all partitions, as applications use it.
	Partitions []int32
	Producers  int    // producing goroutines; at least Clients are used
	Clients    int    // kgo clients (0: one per producer); producer i uses client i%Clients
	Acks       string // all, leader or none
	// Rate is the total records/s; 0 produces as fast as the clients'
	// buffers allow. With a rate, latency counts from each record's
	// intended send time, so a stall is not hidden by sending less.
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
	// Linger is kgo's ProducerLinger; negative keeps kgo's default (10 ms).
	Linger time.Duration
	// MaxBuffered is kgo's MaxBufferedRecords per client; 0 keeps the
	// default (50,000).
	MaxBuffered int
	// Compression is the producers' batch codec: none (the default), gzip,
	// snappy, lz4 or zstd. Every record carries the same random value, so
	// a compressed batch holds it once per record: what the codec finds.
	Compression string
	// Stamp writes the send time (unix ns, 8 bytes) at the start of every
	// value so that a consumer can measure end-to-end latency.
	Stamp  bool
	Logger *slog.Logger
}

func (c *ProduceConfig) validate() error {
	switch {
	case len(c.Target.Seeds) == 0:
		return errors.New("produce: no seed brokers")
	case c.Topic == "":
		return errors.New("produce: no topic")
	case c.RecordSize < 0 || (c.Stamp && c.RecordSize < 8):
		return fmt.Errorf("produce: record size %d too small", c.RecordSize)
	case c.Producers <= 0 && c.Clients <= 0:
		return errors.New("produce: need producers or clients")
	case c.Duration <= 0:
		return errors.New("produce: duration must be positive")
	case c.Rate < 0:
		return errors.New("produce: negative rate")
	}
	if c.Clients <= 0 {
		c.Clients = c.Producers
	}
	c.Producers = max(c.Producers, c.Clients)
	if _, err := codecOpt(c.Compression); err != nil {
		return err
	}
	_, err := acksOpts(c.Acks)
	return err
}

func codecOpt(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all", "-1", "":
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	case "leader", "1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, nil
	case "none", "0":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}, nil
	}
	return nil, fmt.Errorf("acks %q: want all, leader or none", acks)
}

func (c *ProduceConfig) clientOpts() []kgo.Opt {
	opts := c.Target.options(c.Logger)
	acks, _ := acksOpts(c.Acks)         // validated
	codec, _ := codecOpt(c.Compression) // validated
	opts = append(opts, acks...)
	opts = append(opts,
		kgo.DefaultProduceTopic(c.Topic),
		// None unless asked: values are random, so compression would only
		// cost client CPU.
		kgo.ProducerBatchCompression(codec),
	)
	if len(c.Partitions) > 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	if c.Linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(c.Linger))
	}
	if c.MaxBuffered > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(c.MaxBuffered))
	}
	return opts
}

// produceRun is the shared state of one produce run.
type produceRun struct {
	cfg      ProduceConfig
	rec      *recorder
	value    []byte
	winStart time.Time
	winEnd   time.Time
	acked    atomic.Int64
	bytes    atomic.Int64
}

// Produce runs producers for Warmup+Duration and reports what was
// acknowledged inside the measured window.
func Produce(ctx context.Context, cfg ProduceConfig) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	clients, err := newClients(cfg.Clients, cfg.clientOpts())
	if err != nil {
		return Result{}, err
	}
	defer closeClients(clients)
	run := &produceRun{cfg: cfg, rec: newRecorder(), value: make([]byte, cfg.RecordSize)}
	if _, err := rand.Read(run.value); err != nil {
		return Result{}, fmt.Errorf("random value: %w", err)
	}
	start := time.Now()
	run.winStart = start.Add(cfg.Warmup)
	run.winEnd = run.winStart.Add(cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, run.winEnd)
	defer cancel()
	var wg sync.WaitGroup
	for g := range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.producer(runCtx, clients[g%len(clients)], g, start)
		}()
	}
	wg.Wait()
	flushAll(ctx, clients, flushTimeout)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("produce run interrupted: %w", err)
	}
	res := Result{Kind: "produce", Records: run.acked.Load(), Bytes: run.bytes.Load()}
	if err := res.finish(run.rec.into(&res), cfg.Duration); err != nil {
		return Result{}, err
	}
	return res, nil
}

// producer sends records until the window ends. With a rate it sends what
// is due every millisecond rather than sleeping per record, which keeps
// pacing accurate at high rates.
func (r *produceRun) producer(ctx context.Context, cl *kgo.Client, g int, start time.Time) {
	interval := time.Duration(0)
	if r.cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(r.cfg.Producers) / r.cfg.Rate)
	}
	// Producers are offset from each other so that the total is smooth.
	origin := start.Add(interval * time.Duration(g) / time.Duration(r.cfg.Producers))
	var sent int64
	for ctx.Err() == nil {
		now := time.Now()
		if interval == 0 {
			r.send(ctx, cl, g, sent, now)
			sent++
			continue
		}
		due := int64(now.Sub(origin)/interval) + 1
		for ; sent < due && ctx.Err() == nil; sent++ {
			r.send(ctx, cl, g, sent, origin.Add(time.Duration(sent)*interval))
		}
		sleep(ctx, time.Millisecond)
	}
}

func (r *produceRun) send(ctx context.Context, cl *kgo.Client, g int, seq int64, intended time.Time) {
	rec := &kgo.Record{Value: r.value}
	if r.cfg.Stamp {
		rec.Value = make([]byte, len(r.value))
		copy(rec.Value, r.value)
		binary.BigEndian.PutUint64(rec.Value, uint64(intended.UnixNano()))
	}
	if parts := r.cfg.Partitions; len(parts) > 0 {
		rec.Partition = parts[(int64(g)+seq)%int64(len(parts))]
	}
	cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
		now := time.Now()
		if err != nil {
			if !now.Before(r.winEnd) || ctx.Err() != nil {
				return // cut off by the end of the run, not a failure
			}
			r.rec.fail(err)
			return
		}
		if !now.Before(r.winStart) && !now.After(r.winEnd) {
			r.acked.Add(1)
			r.bytes.Add(int64(len(rec.Value)))
		}
		// Latency counts every record meant to be sent in the window, also
		// when its ack comes after the window (see the flush in Produce).
		if !intended.Before(r.winStart) && intended.Before(r.winEnd) {
			r.rec.record(now.Sub(intended))
		}
	})
}

// flushTimeout bounds the wait for records still in flight when a window
// ends; records that were never sent fail with the run's context instead.
const flushTimeout = 15 * time.Second

func flushAll(ctx context.Context, clients []*kgo.Client, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cl.Flush(ctx) // a timeout leaves those records out of the latency
		}()
	}
	wg.Wait()
}

func newClients(n int, opts []kgo.Opt) ([]*kgo.Client, error) {
	clients := make([]*kgo.Client, 0, n)
	for range n {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			closeClients(clients)
			return nil, fmt.Errorf("new kafka client: %w", err)
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// closeClients closes clients in parallel: closing a thousand one by one
// takes long.
func closeClients(clients []*kgo.Client) {
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.Close()
		}()
	}
	wg.Wait()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
