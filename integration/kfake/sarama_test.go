package kfake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "kproxy-kfake-sarama"
	cfg.Version = sarama.V3_6_0_0
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 250 * time.Millisecond
	return cfg
}

// saramaClient connects to the proxy and fails the test if metadata names
// any broker address but the proxy's.
func saramaClient(t *testing.T, addr string, cfg *sarama.Config) sarama.Client {
	t.Helper()
	cl, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama client for %s: %v", addr, err)
	}
	t.Cleanup(func() { cl.Close() })
	for _, b := range cl.Brokers() {
		if b.Addr() != addr {
			t.Errorf("sarama learned broker %d at %s; only the proxy %s should be advertised", b.ID(), b.Addr(), addr)
		}
	}
	return cl
}

// saramaProduce sends n keyed messages through an idempotent acks=all
// sarama producer and returns their acknowledgements.
func saramaProduce(ctx context.Context, t *testing.T, addr, topic, prefix string, n, keys int) []rec {
	t.Helper()
	cfg := saramaConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 20
	cfg.Producer.Return.Successes = true
	cl := saramaClient(t, addr, cfg)
	p, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i%keys)),
			Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", prefix, i)),
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.SendMessages(msgs) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatalf("sarama SendMessages of %d to %s did not finish: %v", n, topic, ctx.Err())
	}
	if err != nil {
		t.Fatalf("sarama SendMessages to %s: %v", topic, err)
	}
	acks := make([]rec, n)
	for i, m := range msgs {
		acks[i] = rec{m.Partition, m.Offset, string(m.Key.(sarama.StringEncoder)), string(m.Value.(sarama.StringEncoder))}
	}
	return acks
}

// saramaConsume reads want records of topic with sarama's partition
// consumers, each partition from the offset in from.
func saramaConsume(ctx context.Context, t *testing.T, addr, topic string, from map[int32]int64, want int) map[int32][]rec {
	t.Helper()
	cl := saramaClient(t, addr, saramaConfig())
	c, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for p, off := range from {
		pc, err := c.ConsumePartition(topic, p, off)
		if err != nil {
			t.Fatalf("sarama consume %s/%d from %d: %v", topic, p, off, err)
		}
		defer pc.AsyncClose()
		wg.Go(func() {
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case msgs <- m:
					case <-cctx.Done():
						return
					}
				case <-cctx.Done():
					return
				}
			}
		})
	}
	got := map[int32][]rec{}
	for n := 0; n < want; n++ {
		select {
		case m := <-msgs:
			got[m.Partition] = append(got[m.Partition], rec{m.Partition, m.Offset, string(m.Key), string(m.Value)})
		case <-ctx.Done():
			t.Fatalf("sarama consumed %d of %d records of %s before the deadline", n, want, topic)
		}
	}
	return got
}

// endOffsets lists topic's end offsets through cl.
func endOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	l, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}
