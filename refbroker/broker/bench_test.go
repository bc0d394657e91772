package broker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceConsume measures one broker end to end with kgo: b.N
// records of 100 bytes over 4 partitions, produced (idempotent, acks=all)
// and then consumed. Reported: records/s each way and records per fenced
// commit (how well concurrent produces share one commit).
func BenchmarkProduceConsume(b *testing.B) {
	c := newCluster(b)
	reg := prometheus.NewRegistry()
	c.start(1, func(cfg *Config) { cfg.Registerer = reg })
	cl := c.client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	c.createTopic(cl, "bench", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 100)
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatalf("flush: %v", err)
	}
	produced := time.Since(start)
	consumer := c.client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	start = time.Now()
	for n := 0; n < b.N; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", n, b.N)
		}
		n += fs.NumRecords()
	}
	consumed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/produced.Seconds(), "produced/s")
	b.ReportMetric(float64(b.N)/consumed.Seconds(), "consumed/s")
	if commits := gatherValue(b, reg, "kproxy_broker_commits_total"); commits > 0 {
		b.ReportMetric(float64(b.N)/commits, "records/commit")
	}
}

// BenchmarkProduceLatency is one acks=all record at a time: the time per op
// is a produce's full round trip including its object write and fenced etcd
// commit.
func BenchmarkProduceLatency(b *testing.B) {
	c := newCluster(b)
	c.start(1, nil)
	cl := c.client()
	c.createTopic(cl, "lat", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 100)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: value}).FirstErr(); err != nil {
		b.Fatalf("warm up: %v", err)
	}
	b.ResetTimer()
	for range b.N {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: value}).FirstErr(); err != nil {
			b.Fatalf("produce: %v", err)
		}
	}
}
