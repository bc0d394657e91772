package kfake

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyedProduceReadBack: keyed, idempotent acks=all produces through the
// proxy land on every partition at the offsets acknowledged, and reading
// them back through the proxy gives exactly what kfake holds.
func TestKeyedProduceReadBack(t *testing.T) {
	const topic, parts = "orders", 6
	e := newEnv(t, topicSpec{topic, parts})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("kgo", func(t *testing.T) {
		e := e.in(t)
		prod := e.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
		acks := produceKeyed(ctx, t, prod, topic, "kgo", 600, 60)
		perPart := map[int32]int{}
		for _, a := range acks {
			perPart[a.partition]++
		}
		if len(perPart) != parts {
			t.Errorf("keyed records reached %d of %d partitions: %v", len(perPart), parts, perPart)
		}
		viaProxy := consumeFromStart(ctx, t, e.client, topic, len(acks))
		checkAcked(t, "consumed via proxy", acks, viaProxy)
		checkKeyOrder(t, "consumed via proxy", viaProxy)
		direct := consumeFromStart(ctx, t, func(o ...kgo.Opt) *kgo.Client { return newKgo(t, e.fake.ListenAddrs(), o...) }, topic, len(acks))
		sameRecords(t, "via proxy vs kfake direct", viaProxy, direct)
	})

	t.Run("sarama", func(t *testing.T) {
		e := e.in(t)
		before := endOffsets(ctx, t, e.direct, topic)
		acks := saramaProduce(ctx, t, e.srv.Addr(), topic, "sarama", 120, 24)
		for _, a := range acks {
			if a.offset < before[a.partition] {
				t.Errorf("sarama ack %s is below the end offset %d before it was produced", a, before[a.partition])
			}
		}
		got := saramaConsume(ctx, t, e.srv.Addr(), topic, before, len(acks))
		checkAcked(t, "sarama consumed via proxy", acks, got)
		checkKeyOrder(t, "sarama consumed via proxy", got)
	})
}

// TestLargeBatchesReadBack: uncompressed record batches of many KiB, which
// the proxy writes to the broker from the client's request frame instead of
// copying them (proxy/apis/vecenc.go), reach kfake intact: read back from
// kfake directly they are exactly what was acknowledged.
func TestLargeBatchesReadBack(t *testing.T) {
	const topic, parts = "large", 6
	e := newEnv(t, topicSpec{topic, parts})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := e.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	acks := produceKeyed(ctx, t, prod, topic, strings.Repeat("x", 2<<10), 300, 30)
	direct := consumeFromStart(ctx, t, func(o ...kgo.Opt) *kgo.Client { return newKgo(t, e.fake.ListenAddrs(), o...) }, topic, len(acks))
	checkAcked(t, "consumed from kfake", acks, direct)
}
