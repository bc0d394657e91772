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

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
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
	c := devtest.Start(t, devcluster.Config{Brokers: 3, Proxies: 1, AutoCreateTopics: true, DefaultPartitions: partitions})
	proxy, admin := c.ProxyAddrs()[0], c.AdminAddrs()[0]
	for _, tc := range []struct {
		name    string
		maxWait time.Duration // 0: kgo's default (5s)
	}{
		{"default-maxwait", 0},
		// A short MaxWait. Not shorter: on a 2-core CI machine at load 23
		// under -race a working proxy's median reached 275 ms, past a 1 s
		// MaxWait's bound (250 ms); at 2 s it reached 373 ms (bound 500
		// ms) while its p90 reached 1.11 s, which is why the p90 is no
		// longer judged: the early answers are.
		{"maxwait-2s", 2 * time.Second},
		// Abandoned long polls pile up at the fetch rate times MaxWait: a
		// long MaxWait makes them outnumber the upstream connection's
		// in-flight slots even when a busy machine slows the fetches.
		{"maxwait-30s", 30 * time.Second},
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
			fetches0, early0 := spanCounts(t, admin)
			lat := measureSpanLatency(t, proxy, topic, partitions, busy, maxWait, opts)
			fetches, early := spanCounts(t, admin)
			fetches, early = fetches-fetches0, early-early0
			logLatency(t, lat)
			t.Logf("%v of %v merged fetches answered before the idle broker", early, fetches)
			// What is judged is what the proxy did, not how fast the
			// machine was: a proxy that waits for the idle broker answers
			// no merged fetch early, while records arriving all along end
			// nearly every fetch of the window early (only those after
			// the last record wait out MaxWait). The latency is logged.
			if fetches == 0 || early < fetches/2 {
				t.Errorf("%v of %v merged fetches answered before the idle broker, want at least half: merged fetches waited for the idle broker", early, fetches)
			}
			// And the records come well within MaxWait: a proxy that
			// waits for the idle broker has a median near MaxWait/2.
			if p50 := lat[len(lat)/2]; p50 >= maxWait/4 {
				t.Errorf("median send-to-receipt latency %v >= MaxWait/4 (%v): merged fetches waited for the idle broker", p50, maxWait/4)
			}
		})
	}
}

// spanCounts reads the proxy's Fetch requests and its early fetch answers
// (kproxy_fetch_early_returns_total: a merged fetch answered before every
// broker had).
func spanCounts(t *testing.T, admin string) (fetches, early float64) {
	t.Helper()
	fetches, ok := metric(t, admin, `kproxy_requests_total{api="Fetch"}`)
	if !ok {
		t.Fatal("kproxy_requests_total{api=\"Fetch\"} is not exported")
	}
	early, ok = metric(t, admin, "kproxy_fetch_early_returns_total")
	if !ok {
		t.Fatal("kproxy_fetch_early_returns_total is not exported")
	}
	return fetches, early
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
		n        = 5000
		interval = time.Millisecond // 1000 records/s, for 5s
		size     = 1024
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := startSpanConsumer(t, ctx, proxy, topic, n, opts)

	warmDeadline := time.After(30 * time.Second)
	for i := range partitions {
		select {
		case <-sc.warm:
		case <-warmDeadline:
			t.Fatalf("%d of %d warm-up records of %s consumed within 30s", i, partitions, topic)
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
	deadline := time.After(maxWait + 10*time.Second)
	return sc.collect(t, n, deadline)
}

// logLatency logs sorted latencies' quantiles.
func logLatency(t *testing.T, lat []time.Duration) {
	t.Helper()
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	t.Logf("send-to-receipt latency over %d records: p50 %v, p90 %v, p99 %v, max %v", len(lat), q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
}

// spanConsumer reports each stamped record's send-to-receipt latency on
// got, and each warm-up record on warm.
type spanConsumer struct {
	got  chan time.Duration
	warm chan struct{}
}

func startSpanConsumer(t *testing.T, ctx context.Context, seeds, topic string, n int, opts []kgo.Opt) *spanConsumer {
	t.Helper()
	sc := &spanConsumer{got: make(chan time.Duration, n), warm: make(chan struct{}, 64)}
	cons := newClient(t, seeds, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			fs.EachError(func(tp string, p int32, err error) {
				if ctx.Err() == nil {
					t.Errorf("fetch %s/%d via %s: %v", tp, p, seeds, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "warm" {
					sc.warm <- struct{}{}
					return
				}
				sent, err := strconv.ParseInt(strings.TrimRight(string(r.Value), " "), 10, 64)
				if err != nil {
					t.Errorf("record %s/%d@%d via %s: unstamped value", r.Topic, r.Partition, r.Offset, seeds)
					return
				}
				select {
				case sc.got <- now.Sub(time.Unix(0, sent)):
				default: // more than produced: a duplicate, which other tests judge
				}
			})
		}
	}()
	t.Cleanup(func() { <-done }) // ctx ends first: cleanups run after the test's defers
	return sc
}

// collect returns n latencies, sorted, or fails at deadline.
func (sc *spanConsumer) collect(t *testing.T, n int, deadline <-chan time.Time) []time.Duration {
	t.Helper()
	lat := make([]time.Duration, 0, n)
	for len(lat) < n {
		select {
		case d := <-sc.got:
			lat = append(lat, d)
		case <-deadline:
			t.Fatalf("consumer got %d of %d records within MaxWait+10s of the last produce", len(lat), n)
		}
	}
	slices.Sort(lat)
	return lat
}
