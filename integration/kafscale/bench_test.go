package kafscale

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	kf "github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkKgoProduce is the figure in docs/kafscale.md: a kgo producer
// (acks=all, 1 KiB values, 6 partitions, kgo's defaults otherwise) writing
// b.N records straight to kfake, and through kproxy in KafScale mode to
// kfake acting as KafScale. It reports throughput and the latency of each
// record from Produce to its acknowledgement. Run:
//
//	go test -run '^$' -bench BenchmarkKgoProduce -benchtime 50000x ./integration/kafscale/
func BenchmarkKgoProduce(b *testing.B) { benchBoth(b, produceBench) }

// BenchmarkKgoProduceSync is the same with one record at a time
// (ProduceSync): the latency of one acks=all round trip, without queueing.
//
//	go test -run '^$' -bench BenchmarkKgoProduceSync -benchtime 5000x ./integration/kafscale/
func BenchmarkKgoProduceSync(b *testing.B) { benchBoth(b, produceSyncBench) }

func benchBoth(b *testing.B, run func(b *testing.B, seeds []string, topic string)) {
	const topic = "bench"
	b.Run("direct-kfake", func(b *testing.B) {
		fake, err := kf.NewCluster(kf.NumBrokers(numBrokers), kf.SeedTopics(partitions, topic))
		if err != nil {
			b.Fatal(err)
		}
		defer fake.Close()
		run(b, fake.ListenAddrs(), topic)
	})
	b.Run("kproxy-kafscale", func(b *testing.B) {
		e := newEnv(b, map[string]int32{topic: partitions})
		run(b, []string{e.srv.Addr()}, topic)
	})
}

// warmClient returns a producer that has written to every partition
// (metadata, connections, and KafScale's lease taken by the first produce).
func warmClient(b *testing.B, ctx context.Context, seeds []string, topic string, value []byte) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	for range 100 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatalf("warm-up produce: %v", err)
		}
	}
	return cl
}

func produceSyncBench(b *testing.B, seeds []string, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 1024)
	cl := warmClient(b, ctx, seeds, topic, value)
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for range b.N {
		sent := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatalf("produce: %v", err)
		}
		lat = append(lat, time.Since(sent))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func produceBench(b *testing.B, seeds []string, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, 1024)
	cl := warmClient(b, ctx, seeds, topic, value)
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, b.N)
		first error
	)
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			d := time.Since(sent)
			mu.Lock()
			lat = append(lat, d)
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if first != nil {
		b.Fatalf("produce: %v", first)
	}
	b.ReportMetric(float64(b.N)*float64(len(value))/elapsed.Seconds()/1e6, "MB/s")
	reportLatency(b, lat)
}
