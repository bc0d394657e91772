package kafscale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/segmentio/kafka-go"
)

// kafkaGoKit drives segmentio/kafka-go: a Writer (acks=all, the Hash
// balancer, a 10 ms batch timeout for test speed) and one Reader per
// partition from its first offset.
func kafkaGoKit() clientKit {
	return clientKit{
		name:        "kafka-go",
		unavailable: func() string { return "" },
		produce: func(ctx context.Context, addr, topic string, values []string) error {
			w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll,
				Balancer: &kafka.Hash{}, BatchTimeout: 10 * time.Millisecond, MaxAttempts: 20}
			defer w.Close()
			msgs := make([]kafka.Message, len(values))
			for i, v := range values {
				msgs[i] = kafka.Message{Key: fmt.Append(nil, i), Value: []byte(v)}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("kafka-go write: %w", err)
			}
			return nil
		},
		consume: func(ctx context.Context, addr, topic string, n int) ([]string, error) {
			ctx, cancel := context.WithCancel(ctx)
			out := make(chan string)
			var wg sync.WaitGroup
			defer func() { cancel(); wg.Wait() }() // every reader ends
			for p := range partitions {
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: p,
					MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 500 * time.Millisecond})
				wg.Go(func() {
					defer r.Close()
					for {
						m, err := r.ReadMessage(ctx)
						if err != nil {
							return
						}
						select {
						case out <- string(m.Value):
						case <-ctx.Done():
							return
						}
					}
				})
			}
			return collect(ctx, out, n)
		},
	}
}

// collect reads n values from out, or fails when ctx ends.
func collect(ctx context.Context, out <-chan string, n int) ([]string, error) {
	var got []string
	for len(got) < n {
		select {
		case v := <-out:
			got = append(got, v)
		case <-ctx.Done():
			return got, fmt.Errorf("read %d of %d: %w", len(got), n, ctx.Err())
		}
	}
	return got, nil
}

// confluentKit drives confluent-kafka-go (librdkafka): a producer with
// acks=all that waits for every delivery report, and a group consumer
// reading from the earliest offset.
func confluentKit() clientKit {
	conf := func(addr string, extra ckafka.ConfigMap) *ckafka.ConfigMap {
		cm := ckafka.ConfigMap{"bootstrap.servers": addr, "client.id": "kproxy-kafscale", "log_level": 4}
		for k, v := range extra {
			cm[k] = v
		}
		return &cm
	}
	return clientKit{
		name:        "confluent-kafka-go",
		unavailable: func() string { return "" },
		produce: func(ctx context.Context, addr, topic string, values []string) error {
			p, err := ckafka.NewProducer(conf(addr, ckafka.ConfigMap{"acks": "all"}))
			if err != nil {
				return fmt.Errorf("confluent producer: %w", err)
			}
			defer p.Close()
			reports := make(chan ckafka.Event, len(values))
			for i, v := range values {
				m := &ckafka.Message{TopicPartition: ckafka.TopicPartition{Topic: &topic, Partition: ckafka.PartitionAny},
					Key: fmt.Append(nil, i), Value: []byte(v)}
				if err := p.Produce(m, reports); err != nil {
					return fmt.Errorf("confluent produce %q: %w", v, err)
				}
			}
			var errs []error
			for range values {
				select {
				case ev := <-reports:
					if m, ok := ev.(*ckafka.Message); ok && m.TopicPartition.Error != nil {
						errs = append(errs, m.TopicPartition.Error)
					}
				case <-ctx.Done():
					return fmt.Errorf("confluent delivery reports: %w", ctx.Err())
				}
			}
			return errors.Join(errs...)
		},
		consume: func(ctx context.Context, addr, topic string, n int) ([]string, error) {
			c, err := ckafka.NewConsumer(conf(addr, ckafka.ConfigMap{"group.id": "confluent-" + topic, "auto.offset.reset": "earliest"}))
			if err != nil {
				return nil, fmt.Errorf("confluent consumer: %w", err)
			}
			defer c.Close()
			if err := c.Subscribe(topic, nil); err != nil {
				return nil, fmt.Errorf("confluent subscribe: %w", err)
			}
			var got []string
			for len(got) < n && ctx.Err() == nil {
				m, err := c.ReadMessage(200 * time.Millisecond)
				if err == nil {
					got = append(got, string(m.Value))
				}
			}
			if len(got) < n {
				return got, fmt.Errorf("confluent read %d of %d: %v", len(got), n, ctx.Err())
			}
			return got, nil
		},
	}
}
