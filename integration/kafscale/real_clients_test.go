package kafscale

import (
	"context"
	"testing"
	"time"
)

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
