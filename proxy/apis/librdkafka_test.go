//go:build librdkafka

package apis

import (
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestLibrdkafkaKeepsConsuming checks what kcat relies on: librdkafka (the
// bundled 2.11) negotiates versions with the proxy's ApiVersions, produces
// and consumes partitions on all three brokers, and keeps consuming in
// ping-pong rounds while broker 3 long-polls with nothing (10 s each time:
// waiting for it would outlast the test; the first round may take one
// MaxWait while librdkafka looks up offsets). It needs cgo, so it only builds
// with -tags librdkafka.
func TestLibrdkafkaKeepsConsuming(t *testing.T) {
	srv, _, _ := proxyWithLogs(t)
	deadline := time.Now().Add(40 * time.Second)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": srv.addr(), "linger.ms": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	topic := "t"
	produce := func(part int32, v string) {
		t.Helper()
		done := make(chan kafka.Event, 1)
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: part}, Value: []byte(v)}
		if err := p.Produce(msg, done); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-done:
			if m := e.(*kafka.Message); m.TopicPartition.Error != nil {
				t.Fatalf("produce %s: %v", v, m.TopicPartition.Error)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("produce %s: no delivery report", v)
		}
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": srv.addr(), "group.id": "kcat-like", "enable.auto.commit": false,
		"fetch.wait.max.ms": 10_000, "socket.timeout.ms": 60_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var assign []kafka.TopicPartition
	for part := int32(0); part < 6; part++ { // two partitions on each broker
		assign = append(assign, kafka.TopicPartition{Topic: &topic, Partition: part, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(assign); err != nil {
		t.Fatal(err)
	}
	await := func(want string) {
		t.Helper()
		for time.Now().Before(deadline) {
			m, err := c.ReadMessage(time.Second)
			if err != nil {
				if ke, ok := err.(kafka.Error); ok && ke.IsTimeout() {
					continue
				}
				t.Fatalf("consume: %v", err)
			}
			if string(m.Value) == want {
				return
			}
		}
		t.Fatalf("did not consume %q in time", want)
	}
	for round := range 10 {
		v := fmt.Sprintf("round-%d", round)
		produce(int32(round%2), v) // partitions 0 and 1: brokers 1 and 2
		await(v)
	}
	produce(2, "late") // broker 3's partition, left out of the early answers
	await("late")
}
