//go:build librdkafka

package apis

import (
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestLibrdkafkaProducesAndConsumes checks what kcat relies on: librdkafka
// (the bundled 2.11) negotiates versions with the proxy's ApiVersions,
// produces to partitions on all three brokers and consumes them back. It
// needs cgo, so it only builds with -tags librdkafka.
func TestLibrdkafkaProducesAndConsumes(t *testing.T) {
	srv, _, _ := proxyWithLogs(t)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": srv.addr(), "linger.ms": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	topic := "t"
	parts := []int32{6, 7, 8} // brokers 1, 2, 3
	done := make(chan kafka.Event, len(parts))
	for _, part := range parts {
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: part}, Value: []byte(fmt.Sprint("r", part))}
		if err := p.Produce(msg, done); err != nil {
			t.Fatal(err)
		}
	}
	for range parts {
		select {
		case e := <-done:
			if m := e.(*kafka.Message); m.TopicPartition.Error != nil {
				t.Fatalf("produce: %v", m.TopicPartition.Error)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery report")
		}
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": srv.addr(), "group.id": "kcat-like", "enable.auto.commit": false,
		"fetch.wait.max.ms": 200,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var assign []kafka.TopicPartition
	for _, part := range parts {
		assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: part, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(assign); err != nil {
		t.Fatal(err)
	}
	got := map[int32]string{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(parts) && time.Now().Before(deadline) {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			if ke, ok := err.(kafka.Error); ok && ke.IsTimeout() {
				continue
			}
			t.Fatalf("consume: %v", err)
		}
		got[m.TopicPartition.Partition] = string(m.Value)
	}
	for _, part := range parts {
		if got[part] != fmt.Sprint("r", part) {
			t.Fatalf("partition %d: got %q (all: %v)", part, got[part], got)
		}
	}
}
