package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/devcluster"
)

// TestFetchSpanIdleBroker consumes through the proxy a topic whose
// partitions are owned by all three brokers while records go only to
// partitions of two of them: the third broker's part of every merged fetch
// long-polls for the whole MaxWait. A record must still reach the consumer
// soon after it is produced (issue 3), not when the idle broker's MaxWait
// runs out.
func TestFetchSpanIdleBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("measures produce-to-consume latency over many records")
	}
	const partitions = 12
	c := startCluster(t, devcluster.Config{Brokers: 3, Proxies: 1, AutoCreateTopics: true, DefaultPartitions: partitions})
	proxy := c.ProxyAddrs()[0]
	for _, tc := range []struct {
		name    string
		maxWait time.Duration // 0: kgo's default (5s)
	}{
		{"default-maxwait", 0},
		{"maxwait-500ms", 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "fetchspan-" + tc.name
			maxWait := tc.maxWait
			var opts []kgo.Opt
			if maxWait > 0 {
				opts = append(opts, kgo.FetchMaxWait(maxWait))
			} else {
				maxWait = 5 * time.Second
			}
			busy := prepareSpanTopic(t, c, proxy, topic, partitions)
			lat := measureSpanLatency(t, proxy, topic, partitions, busy, maxWait, opts)
			slices.Sort(lat)
			p50, max := lat[len(lat)/2], lat[len(lat)-1]
			t.Logf("produce-to-consume latency over %d records: p50 %v, p90 %v, max %v (MaxWait %v)", len(lat), p50, lat[len(lat)*9/10], max, maxWait)
			if p50 >= maxWait/4 {
				t.Errorf("median produce-to-consume latency %v >= MaxWait/4 (%v): the merged fetch waited for the idle broker", p50, maxWait/4)
			}
		})
	}
}

// prepareSpanTopic writes one record to every partition (so that each gets
// an owner), checks that every broker owns some, and returns the
// partitions not owned by the broker chosen to stay idle.
func prepareSpanTopic(t *testing.T, c *devcluster.Cluster, proxy, topic string, partitions int32) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newClient(t, proxy, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("warm")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s/%d: %v", topic, p, err)
		}
	}
	byBroker := map[int32][]int32{}
	for p := range partitions {
		b, ok, err := c.Owner(ctx, topic, p)
		if err != nil || !ok {
			t.Fatalf("owner of %s/%d: owned %v, err %v", topic, p, ok, err)
		}
		byBroker[b] = append(byBroker[b], p)
	}
	if len(byBroker) != 3 {
		t.Fatalf("partitions of %s by owner %v: want all three brokers to own some", topic, byBroker)
	}
	idle := c.BrokerIDs()[0]
	var busy []int32
	for b, ps := range byBroker {
		if b != idle {
			busy = append(busy, ps...)
		}
	}
	slices.Sort(busy)
	t.Logf("partitions by owner %v; broker %d stays idle", byBroker, idle)
	return busy
}

// measureSpanLatency consumes topic through proxy from the start, then
// produces stamped records at a steady rate to the busy partitions and
// returns how long each took from send to receipt. A steady rate matters:
// every merged fetch that answers early leaves the idle broker's long poll
// behind, and those pile up only when fetches follow each other quickly.
func measureSpanLatency(t *testing.T, proxy, topic string, partitions int32, busy []int32, maxWait time.Duration, opts []kgo.Opt) []time.Duration {
	t.Helper()
	const (
		n        = 1500
		interval = 2 * time.Millisecond // 500 records/s
		size     = 1024
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan time.Duration, n)
	warm := make(chan struct{}, partitions)
	cons := newClient(t, proxy, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			fs.EachError(func(tp string, p int32, err error) {
				if ctx.Err() == nil {
					t.Errorf("fetch %s/%d: %v", tp, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "warm" {
					warm <- struct{}{}
					return
				}
				sent, err := strconv.ParseInt(strings.TrimRight(string(r.Value), " "), 10, 64)
				if err != nil {
					t.Errorf("record %s/%d@%d: unstamped value", r.Topic, r.Partition, r.Offset)
					return
				}
				select {
				case got <- now.Sub(time.Unix(0, sent)):
				default: // more than produced: a duplicate, which other tests judge
				}
			})
		}
	}()
	defer func() { cancel(); <-done }()

	warmDeadline := time.After(30 * time.Second)
	for range partitions {
		select {
		case <-warm:
		case <-warmDeadline:
			t.Fatalf("warm-up records of %s not consumed within 30s", topic)
		}
	}

	prod := newClient(t, proxy, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		v := []byte(fmt.Sprintf("%-*d", size, time.Now().UnixNano()))
		prod.Produce(ctx, &kgo.Record{Partition: busy[i%len(busy)], Value: v}, func(r *kgo.Record, err error) {
			if err != nil && ctx.Err() == nil {
				t.Errorf("produce to %s/%d: %v", topic, r.Partition, err)
			}
		})
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if err := prod.Flush(pctx); err != nil {
		t.Fatalf("flush producer: %v", err)
	}
	lat := make([]time.Duration, 0, n)
	deadline := time.After(maxWait + 10*time.Second)
	for len(lat) < n {
		select {
		case d := <-got:
			lat = append(lat, d)
		case <-deadline:
			t.Fatalf("consumed %d of %d records within MaxWait+10s of the last produce", len(lat), n)
		}
	}
	return lat
}
