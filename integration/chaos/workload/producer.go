package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// producer is one kgo client sending unique values at a bounded rate, with a
// bounded number of sends outstanding.
type producer struct {
	name       string
	via        string
	idempotent bool
	cfg        Config
	cl         *kgo.Client
	rng        *rand.Rand
	slots      chan struct{} // one token per outstanding send
	pending    sync.WaitGroup
}

func newProducer(cfg Config, i int, via string, idempotent bool) (*producer, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(via),
		kgo.ClientID(fmt.Sprintf("kchaos-producer-%d", i)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout),
		kgo.DialTimeout(2 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	if !idempotent {
		// One attempt per record and one request in flight: a send that
		// fails is then either definitely not written (the broker said so)
		// or unknown, and a plain producer cannot reorder its own sends.
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
			kgo.MaxProduceRequestsInflightPerBroker(1))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("producer %d via %s: %w", i, via, err)
	}
	mode := "plain"
	if idempotent {
		mode = "idem"
	}
	return &producer{
		name: fmt.Sprintf("producer-%02d-%s", i, mode), via: via, idempotent: idempotent, cfg: cfg, cl: cl,
		rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(i))),
		slots: make(chan struct{}, cfg.MaxInflight),
	}, nil
}

// run sends until ctx ends. Sends already started finish on their own; see
// drain.
func (p *producer) run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.cfg.Rate))
	defer tick.Stop()
	for seq := int64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case p.slots <- struct{}{}:
		}
		p.send(seq)
	}
}

func (p *producer) send(seq int64) {
	partition := p.rng.Int32N(p.cfg.Partitions)
	value := fmt.Sprintf("%s-%07d", p.name, seq)
	inv := p.cfg.Recorder.Invoke(history.Op{
		Process: p.name, F: history.Send, Value: value, Partition: partition,
		Idempotent: p.idempotent, Seq: seq, Via: p.via,
	})
	p.pending.Add(1)
	r := &kgo.Record{Topic: p.cfg.Topic, Partition: partition, Value: []byte(value)}
	// The record's context never ends: cancellation would turn sends into
	// unknowns for no reason. Delivery timeout and Close bound each send.
	p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		defer p.pending.Done()
		defer func() { <-p.slots }()
		out := history.Op{Type: classify(err, p.idempotent)}
		if err != nil {
			out.Error = err.Error()
		} else {
			out.Partition, out.Offset = r.Partition, r.Offset
		}
		p.cfg.Recorder.Complete(inv, out)
	})
}

// drain waits until every started send has an outcome or ctx ends, then
// closes the client, which fails what is still outstanding (info).
func (p *producer) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() { p.pending.Wait(); close(done) }() // ends once Close failed the rest
	select {
	case <-done:
	case <-ctx.Done():
	}
	p.cl.Close()
	<-done
}

// definite are produce errors that mean the broker did not write the batch.
var definite = []error{
	kerr.NotLeaderForPartition,
	kerr.UnknownTopicOrPartition,
	kerr.UnknownTopicID,
	kerr.NotEnoughReplicas, // checked before the append, unlike ...AfterAppend
	kerr.InvalidRecord,
	kerr.CorruptMessage,
	kerr.MessageTooLarge,
	kerr.RecordListTooLarge,
	kerr.InvalidRequiredAcks,
	kerr.TopicAuthorizationFailed,
	kerr.InvalidTopicException,
}

// classify maps a send's error to its outcome. An idempotent producer
// retries internally, and an earlier attempt may have been written even when
// the last one was refused, so its failures are always unknown. A plain
// producer makes one attempt (RecordRetries(0)), so a refusal from the broker
// is definite.
func classify(err error, idempotent bool) history.Type {
	if err == nil {
		return history.OK
	}
	if idempotent {
		return history.Info
	}
	for _, d := range definite {
		if errors.Is(err, d) {
			return history.Fail
		}
	}
	return history.Info
}
