package broker

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceConsumeRoundTrip(t *testing.T) {
	c := newCluster(t)
	c.start(1, nil)
	cl := c.client(kgo.DefaultProduceTopic("rt"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c.createTopic(cl, "rt", 3)
	ctx := testCtx(t, 30*time.Second)
	const n = 300
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: recordValue(i), Partition: int32(i % 3)}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	recs := consumeN(t, c, "rt", n)
	seen := make(map[string]bool)
	next := map[int32]int64{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
		seen[string(r.Value)] = true
	}
	for i := range n {
		if !seen[string(recordValue(i))] {
			t.Fatalf("record %d not consumed", i)
		}
	}
}

// Stopping a broker stops every goroutine it started.
func TestStopLeavesNoGoroutines(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.client(kgo.DefaultProduceTopic("leak"), kgo.ConsumeTopics("leak"), kgo.ConsumerGroup("leakg"),
		kgo.FetchMaxWait(5*time.Second))
	c.createTopic(cl, "leak", 2)
	ctx := testCtx(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	polled := time.Now()
	for n := 0; n < 1; {
		n += cl.PollFetches(ctx).NumRecords()
	}
	t.Logf("first record consumed after %v", time.Since(polled))
	// Stop with a long poll and a group member still connected.
	start := time.Now()
	c.stop(b.ID())
	t.Logf("graceful stop took %v", time.Since(start))
	go cl.Close() // its LeaveGroup has no broker to go to any more
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := brokerGoroutines()
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after stop:\n%s", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// brokerGoroutines returns the stacks of goroutines running this package's
// code (other than tests).
func brokerGoroutines() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "kproxy/refbroker/broker") && !strings.Contains(g, "_test.go") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
