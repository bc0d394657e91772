package kafscale

import (
	"context"
	"testing"
	"time"
)

// TestRealClients: every client of the matrix produces (acks=all) and
// consumes through kproxy in front of two real KafScale brokers; every
// acknowledged record comes back. kgo is TestRealKgoProduceConsume.
func TestRealClients(t *testing.T) {
	kits := []clientKit{saramaKit(), kafkaGoKit(), confluentKit(), kcatKit(), kafkajsKit()}
	topics := map[string]int32{}
	for _, c := range kits {
		topics["real-"+c.name] = partitions
	}
	e := newRealEnv(t, topics)
	for _, c := range kits {
		t.Run(c.name, func(t *testing.T) {
			c.require(t)
			topic := "real-" + c.name
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const n = 200
			values := c.values(n)
			start := time.Now()
			if err := c.produce(ctx, e.kp.Addr(), topic, values); err != nil {
				t.Fatalf("%s produce through kproxy: %v", c.name, err)
			}
			produced := time.Now()
			got, err := c.consume(ctx, e.kp.Addr(), topic, n)
			if err != nil {
				t.Fatalf("%s consume through kproxy: %v", c.name, err)
			}
			t.Logf("%s: produced %d in %v, consumed them in %v", c.name, n, produced.Sub(start).Round(time.Millisecond), time.Since(produced).Round(time.Millisecond))
			c.checkRead(t, values, got)
		})
	}
}

// TestRealKgoProduceConsume: kgo produces (acks=all) and consumes through
// kproxy in front of two real KafScale brokers; every record comes back.
func TestRealKgoProduceConsume(t *testing.T) {
	const topic = "real-kgo"
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := e.produceN(ctx, topic, 200)
	if missing := e.consumeAll(ctx, topic, want); len(missing) > 0 {
		t.Fatalf("kgo through kproxy: %d of %d acknowledged records not consumed within a minute (e.g. %v)", len(missing), len(want), missing[:min(5, len(missing))])
	}
}
