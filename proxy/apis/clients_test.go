package apis

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/routing"
)

// proxyWithLogs serves a dispatcher over the shared in-memory log.
func proxyWithLogs(t *testing.T) (*testServer, *logSender, *routing.Table) {
	logs := newLogSender(t)
	rt := testTable()
	srv := startServer(t, func(host string, port int32) *Dispatcher {
		cfg := testConfig(rt, nil)
		cfg.Sender, cfg.AdvertisedHost, cfg.AdvertisedPort = logs, host, port
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
	return srv, logs, rt
}

func kgoLogger() kgo.Logger {
	if os.Getenv("APIS_TEST_LOG") != "" {
		return kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)
	}
	return nil
}

// TestKgoKeepsConsuming: a kgo consumer of all 16 partitions, whose fetches
// span three brokers, keeps getting records in ping-pong rounds although
// broker 3 has nothing and long-polls for a minute each time. If the proxy
// waited for the idle broker, the first round would outlast the test's
// deadline. Partitions left out of early answers (broker 3's) are fetched
// again, through the long poll the proxy parked for them: a record later
// written there arrives too.
func TestKgoKeepsConsuming(t *testing.T) {
	srv, logs, _ := proxyWithLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(srv.addr()), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(srv.addr()), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Minute),
		kgo.WithLogger(kgoLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	produce := func(part int32, v string) {
		t.Helper()
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s to %d: %v", v, part, err)
		}
	}
	seen := map[string]bool{}
	await := func(want string) {
		t.Helper()
		for !seen[want] {
			fs := consumer.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			for _, e := range fs.Errors() {
				t.Fatalf("fetch error %s/%d: %v", e.Topic, e.Partition, e.Err)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
	}
	// Warm up: until kgo has loaded every partition's start offset, its
	// (single) in-flight fetch may name only some partitions, and a long
	// poll on those holds it for MaxWait, with a real broker as much as
	// with the proxy. A record in each partition gets every one going.
	for p := range int32(16) {
		produce(p, fmt.Sprint("warm-", p))
	}
	for p := range int32(16) {
		await(fmt.Sprint("warm-", p))
	}
	for round := range 10 {
		v := fmt.Sprintf("round-%d", round)
		produce(int32(round%2), v) // partitions 0 and 1: brokers 1 and 2
		await(v)
	}
	produce(2, "late") // partition 2: broker 3, left out of every early answer so far
	await("late")

	logs.mu.Lock()
	idleFetches := logs.fetchesTo[3]
	logs.mu.Unlock()
	// "late" arrived, so the consumer kept asking for broker 3's
	// partitions. It must have done so by adopting the long poll the first
	// early answer parked, not with a new one per round: those would pile
	// up on the broker, each holding an upstream slot for MaxWait.
	if idleFetches >= 10 {
		t.Fatalf("broker 3 got %d long polls in 10 rounds: early answers left them behind instead of reusing one", idleFetches)
	}
}

// TestSaramaProducesAndConsumes: sarama (at Kafka 4.0 protocol versions)
// writes to partitions on all three brokers and reads them back.
func TestSaramaProducesAndConsumes(t *testing.T) {
	srv, _, _ := proxyWithLogs(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond // the test server answers one request at a time per connection
	producer, err := sarama.NewSyncProducer([]string{srv.addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	parts := []int32{0, 1, 2} // brokers 1, 2, 3
	for _, p := range parts {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "t", Partition: p, Value: sarama.StringEncoder(fmt.Sprint("s", p))}); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	consumer, err := sarama.NewConsumer([]string{srv.addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for _, p := range parts {
		pc, err := consumer.ConsumePartition("t", p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume %d: %v", p, err)
		}
		select {
		case m := <-pc.Messages():
			if string(m.Value) != fmt.Sprint("s", p) {
				t.Fatalf("partition %d: got %q", p, m.Value)
			}
		case err := <-pc.Errors():
			t.Fatalf("partition %d: %v", p, err)
		case <-time.After(15 * time.Second):
			t.Fatalf("partition %d: no message", p)
		}
		pc.Close()
	}
}

type byKey struct{}

func (byKey) Balance(m kafkago.Message, _ ...int) int { return int(m.Key[0]) }

// TestKafkaGoProducesAndConsumes: segmentio/kafka-go likewise.
func TestKafkaGoProducesAndConsumes(t *testing.T) {
	srv, _, _ := proxyWithLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := &kafkago.Writer{Addr: kafkago.TCP(srv.addr()), Topic: "t", Balancer: byKey{}, RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	parts := []int{3, 4, 5} // brokers 1, 2, 3
	for _, p := range parts {
		if err := w.WriteMessages(ctx, kafkago.Message{Key: []byte{byte(p)}, Value: []byte(fmt.Sprint("k", p))}); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	for _, p := range parts {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{srv.addr()}, Topic: "t", Partition: p, MaxWait: 200 * time.Millisecond})
		m, err := r.ReadMessage(ctx)
		r.Close()
		if err != nil || string(m.Value) != fmt.Sprint("k", p) {
			t.Fatalf("partition %d: %q, %v", p, m.Value, err)
		}
	}
}
