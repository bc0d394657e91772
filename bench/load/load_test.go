package load

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
	"github.com/kproxy/kproxy/testkit/faultnet"
)

// startBrokers runs n stub brokers sharing one embedded etcd and one memory
// store, all stopped when the test ends, and returns their addresses.
func startBrokers(t *testing.T, n int) []string {
	t.Helper()
	srv, _ := etcdtest.Start(t)
	st := store.NewMemory()
	var addrs []string
	for id := range int32(n) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := broker.New(ctx, broker.Config{
			ID: id + 1, Etcd: etcdtest.NewClient(t, srv.Endpoint), Layout: layout.New("/kbench-test"),
			Store: st, LeaseTTL: 3 * time.Second, AutoCreateTopics: true, Logger: slog.New(slog.DiscardHandler),
		})
		cancel()
		if err != nil {
			t.Fatalf("start broker %d: %v", id+1, err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.Run(runCtx) }()
		t.Cleanup(func() {
			stop()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("broker %d did not stop within 30s", b.ID())
			}
		})
		addrs = append(addrs, b.Addr())
	}
	return addrs
}

func checkResult(t *testing.T, res Result, kind string) {
	t.Helper()
	t.Logf("%s: %d records, %.0f records/s, %.2f MB/s, latency %+v", kind, res.Records, res.RecordsPerSec, res.MBPerSec, res.Latency)
	if res.Kind != kind || res.Records <= 0 || res.Bytes <= 0 || res.RecordsPerSec <= 0 {
		t.Fatalf("%s result counts nothing: %+v", kind, res)
	}
	if res.Errors != 0 {
		t.Fatalf("%s: %d errors, first: %s", kind, res.Errors, res.FirstError)
	}
	l := res.Latency
	if l.Count <= 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Fatalf("%s latency summary is inconsistent: %+v", kind, l)
	}
	h, err := DecodeHistogram(res.Hist)
	if err != nil {
		t.Fatalf("%s histogram: %v", kind, err)
	}
	if h.TotalCount() != l.Count {
		t.Fatalf("%s histogram holds %d values, summary says %d", kind, h.TotalCount(), l.Count)
	}
}

// TestProduceConsumeE2E runs every kind of run briefly against real stub
// brokers, directly and through relays with the dial map, and checks that
// what was produced is read back.
func TestProduceConsumeE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and brokers")
	}
	addrs := startBrokers(t, 3)
	direct := Target{Seeds: addrs}
	relayed := Target{DialMap: map[string]string{}}
	for _, a := range addrs {
		r, err := faultnet.NewRelay("127.0.0.1:0", a, nil)
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		relayed.Seeds = append(relayed.Seeds, r.Addr())
		relayed.DialMap[a] = r.Addr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "load-test"
	if err := EnsureTopic(ctx, direct, topic, 6, nil); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := EnsureTopic(ctx, relayed, topic, 6, nil); err != nil {
		t.Fatalf("create existing topic again: %v", err)
	}
	if err := EnsureTopic(ctx, direct, topic, 5, nil); err == nil || !strings.Contains(err.Error(), "6 partitions") {
		t.Fatalf("create with another partition count: err=%v, want a mismatch", err)
	}

	var produced int64
	for _, tc := range []struct {
		name string
		t    Target
		rate float64
	}{
		{"direct max", direct, 0},
		{"relayed at a rate", relayed, 500},
	} {
		res, err := Produce(ctx, ProduceConfig{
			Target: tc.t, Topic: topic, RecordSize: 100, Producers: 2, Clients: 2, Acks: "all",
			Rate: tc.rate, Warmup: 500 * time.Millisecond, Duration: time.Second, Linger: -1,
		})
		if err != nil {
			t.Fatalf("%s: produce: %v", tc.name, err)
		}
		checkResult(t, res, "produce")
		if tc.rate > 0 && (res.RecordsPerSec < tc.rate*0.5 || res.RecordsPerSec > tc.rate*1.5) {
			t.Fatalf("%s: %.0f records/s, asked for %.0f", tc.name, res.RecordsPerSec, tc.rate)
		}
		produced += res.Records
	}

	res, err := Consume(ctx, ConsumeConfig{Target: relayed, Topic: topic, Consumers: 2, Duration: 30 * time.Second})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	checkResult(t, res, "consume")
	if res.Records < produced {
		t.Fatalf("consumed %d records, but %d were acknowledged in the measured windows alone", res.Records, produced)
	}

	res, err = E2E(ctx, E2EConfig{
		Target: direct, Topic: topic, RecordSize: 100, Partitions: []int32{0, 1}, Rate: 200,
		Warmup: 500 * time.Millisecond, Duration: time.Second,
	})
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	checkResult(t, res, "e2e")
}

func TestOpenIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and brokers")
	}
	addrs := startBrokers(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idle, err := OpenIdle(ctx, addrs[0], 50, 8)
	if err != nil {
		t.Fatalf("OpenIdle: %v", err)
	}
	defer idle.Close()
	if idle.Len() != 50 {
		t.Fatalf("Len = %d, want 50", idle.Len())
	}
}
