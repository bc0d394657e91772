package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/refbroker/broker"
)

// TestSerialBrokersRoundTrip: kproxy in front of two stub brokers that
// serve one request per connection at a time (--serial-requests, the shape
// of Kafka and KafScale). Producers writing at once each get on-demand
// broker connections of their own, and a consumer reads back every record
// in order: with acks=all (idempotent), and with acks=0, whose requests
// no answer orders (proxy/upstream/confirm.go keeps them in line).
func TestSerialBrokersRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		acksZero bool
	}{
		{"acks-all", false},
		{"acks-0", true},
	} {
		t.Run(tc.name, func(t *testing.T) { serialRoundTrip(t, tc.name, tc.acksZero) })
	}
}

func serialRoundTrip(t *testing.T, topic string, acksZero bool) {
	const parts, producers, perProducer = 4, 8, 50
	var opts []kgo.Opt
	if acksZero {
		opts = []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
	}
	addr, reg := stubPool(t, parts,
		func(c *broker.Config) { c.SerialRequests = true },
		func(*assembly.Config) {})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Go(func() {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0)}, opts...)...)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for i := range perProducer {
				r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "p%d", p), Value: fmt.Appendf(nil, "%d", i)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					errs <- fmt.Errorf("producer %d record %d: %w", p, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := metricSum(t, reg, "kproxy_upstream_on_demand_connections"); n < 2 {
		t.Fatalf("on-demand broker connections = %v, want at least one per broker", n)
	}
	if n := metricSum(t, reg, "kproxy_upstream_barriers_total"); (n > 0) != acksZero {
		t.Fatalf("barriers behind acks=0 produces = %v, with acks=0 %v", n, acksZero)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[string]int{}
	for got := 0; got < producers*perProducer; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", got, producers*perProducer)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if want := fmt.Sprint(next[k]); string(r.Value) != want {
				t.Fatalf("key %s: got record %s, want %s", k, r.Value, want)
			}
			next[k]++
			got++
		})
	}
}

// metricSum adds up every series of the gauge or counter name in reg.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
