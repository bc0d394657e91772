package kafscale

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRealBrokerKilled: a kgo producer (acks=all) writes through kproxy
// while the real KafScale broker holding most partition leases gets
// SIGKILL. Its leases run out after their 10 s TTL, the other broker takes
// the partitions on its next Produce, and every record the producer saw
// acknowledged, before and after the kill, is read back through kproxy.
func TestRealBrokerKilled(t *testing.T) {
	const topic = "real-kill"
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	producer := e.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))

	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		failed int
	)
	total := 0
	produce := func(n int) {
		var wg sync.WaitGroup
		for range n {
			v := fmt.Sprintf("v%d", total)
			total++
			wg.Add(1)
			producer.Produce(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acked[string(r.Value)] = true
			})
			time.Sleep(2 * time.Millisecond) // a steady stream
		}
		wg.Wait()
	}
	produce(300)
	victim, held := e.leaseHolder(ctx, topic)
	if held == 0 {
		t.Fatalf("no partition of %s leased after 300 acknowledged records", topic)
	}
	survivor := 1 - victim
	var wg sync.WaitGroup
	wg.Go(func() { produce(600) }) // in flight across the kill and the takeover
	time.Sleep(100 * time.Millisecond)
	if err := e.rig.KillBroker(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	wg.Wait()
	if owners := e.leases(ctx, topic); len(owners) != 4 || !allOwnedBy(owners, survivor) {
		t.Fatalf("after broker %d was killed and 600 more records were acknowledged, leases are %v, want all on broker %d", victim, owners, survivor)
	}
	mu.Lock()
	want := make(map[string]bool, len(acked))
	for v := range acked {
		want[v] = true
	}
	mu.Unlock()
	if len(want) < total-failed || len(want) < 300 {
		t.Fatalf("only %d of %d records acknowledged (%d failed)", len(want), total, failed)
	}
	t.Logf("broker %d (held %d leases) killed; %d of %d records acknowledged (%d failed), the last %v after the kill",
		victim, held, len(want), total, failed, time.Since(killed).Round(time.Millisecond))
	if missing := e.consumeAll(ctx, topic, want); len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged records not read back through kproxy after broker %d was killed (e.g. %v)", len(missing), len(want), victim, missing[:min(5, len(missing))])
	}
}

// leases reads topic's partition lease keys: partition to owner.
func (e *realEnv) leases(ctx context.Context, topic string) map[int32]int32 {
	e.t.Helper()
	pre := "/kafscale/partition-leases/" + topic + "/"
	resp, err := e.rig.Etcd.Get(ctx, pre, clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int32]int32{}
	for _, kv := range resp.Kvs {
		p, err1 := strconv.Atoi(string(kv.Key[len(pre):]))
		o, err2 := strconv.Atoi(string(kv.Value))
		if err1 == nil && err2 == nil {
			out[int32(p)] = int32(o)
		}
	}
	return out
}

// leaseHolder is the broker holding most of topic's leases, and how many.
func (e *realEnv) leaseHolder(ctx context.Context, topic string) (int32, int) {
	count := map[int32]int{}
	for _, o := range e.leases(ctx, topic) {
		count[o]++
	}
	best, n := int32(0), 0
	for o, c := range count {
		if c > n || (c == n && o < best) {
			best, n = o, c
		}
	}
	return best, n
}

func allOwnedBy(owners map[int32]int32, id int32) bool {
	for _, o := range owners {
		if o != id {
			return false
		}
	}
	return true
}
