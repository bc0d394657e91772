package kfake

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holSlots is the proxy's UpstreamConnsPerBroker in TestUpstreamHeadOfLine
// (the proxy's default), set explicitly so that the test opens exactly one
// long-polling client connection per broker connection.
const holSlots = 4

// holMaxWait is the long-poll wait of the fetches that occupy the broker
// connections.
const holMaxWait = 1500 * time.Millisecond

// TestUpstreamHeadOfLine: kfake, like Apache Kafka, handles one request at
// a time per connection (a Kafka broker mutes a connection until it has
// answered its request). Were the proxy to multiplex client connections
// onto holSlots shared connections per broker, with a long-polling Fetch in
// flight on each of them, a produce from another client would wait behind
// a stranger's long poll, although kfake answers the same produce at once
// when the fetches and the produce use their own connections. The proxy
// keeps long polls on dedicated connections and gives every client
// connection on-demand connections of its own, so it must not.
func TestUpstreamHeadOfLine(t *testing.T) {
	t.Parallel() // mostly waiting on long polls
	e := newEnvConns(t, holSlots, topicSpec{"hol-idle", 1}, topicSpec{"hol-busy", 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader := e.fake.LeaderFor("hol-busy", 0)
	if e.fake.LeaderFor("hol-idle", 0) != leader {
		if err := e.fake.MoveTopicPartition("hol-idle", 0, leader); err != nil {
			t.Fatalf("kfake move hol-idle/0 to %d: %v", leader, err)
		}
		e.waitRoutes(e.republish(ctx, "hol-idle", 0))
	}
	arrived := countIdleFetches(e, leader)

	measure := func(t *testing.T, fetchAddr string, producer *kgo.Client) []time.Duration {
		t.Helper()
		before := arrived.Load()
		stop := longPolls(ctx, t, fetchAddr, e.ids["hol-idle"], holSlots)
		defer stop()
		waitCount(t, arrived, before+holSlots, "long-polling fetches to reach kfake")
		var lat []time.Duration
		for i := range 3 {
			start := time.Now()
			r := &kgo.Record{Topic: "hol-busy", Value: fmt.Appendf(nil, "hol-%d", i)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
			lat = append(lat, time.Since(start))
		}
		return lat
	}

	direct := measure(t, e.nodes[leader], newKgo(t, e.fake.ListenAddrs(), kgo.ProducerLinger(0)))
	viaProxy := measure(t, e.srv.Addr(), e.client(kgo.ProducerLinger(0)))
	t.Logf("produce latency while %d long polls hold kfake broker %d: kfake direct %v, through the proxy %v", holSlots, leader, direct, viaProxy)
	for i, d := range direct {
		if d > holMaxWait/3 {
			t.Fatalf("kfake direct produce %d took %v: the baseline itself is slow, the comparison proves nothing", i, d)
		}
	}
	for i, d := range viaProxy {
		if d > holMaxWait/3 {
			t.Errorf("produce %d through the proxy took %v (kfake direct: %v): it was queued on an upstream connection behind another client's long-polling Fetch (MaxWait %v); a broker that answers one request per connection at a time (kfake, Apache Kafka) makes every client sharing a pooled connection wait for strangers' long polls and JoinGroups", i, d, direct[i], holMaxWait)
		}
	}
}

// countIdleFetches counts Fetch requests for hol-idle that reach kfake
// broker node; it observes only (kfake then handles them as usual).
func countIdleFetches(e *env, node int32) *atomic.Int64 {
	var n atomic.Int64
	e.fake.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if e.fake.CurrentNode() != node {
			return nil, nil, false
		}
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			if rt.Topic == "hol-idle" || rt.TopicID == e.ids["hol-idle"] {
				n.Add(1)
			}
		}
		return nil, nil, false
	})
	return &n
}

// longPolls opens n connections to addr, in a row (so that the proxy gives
// them consecutive ids, one per pooled broker connection), each fetching
// the empty hol-idle/0 over and over with MaxWait holMaxWait. stop closes
// them and waits.
func longPolls(ctx context.Context, t *testing.T, addr string, topicID [16]byte, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
	}
	for _, rc := range conns {
		wg.Go(func() {
			for i := 0; i < 40 && ctx.Err() == nil; i++ { // bounded: 40 polls of 1.5s
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, int32(holMaxWait/time.Millisecond), 1, 1<<20
				req.SessionEpoch = -1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic, rt.TopicID = "hol-idle", topicID
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = -1, -1, -1, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				if _, err := rc.do(ctx, req); err != nil {
					return // closed by stop, or the test fails elsewhere
				}
			}
		})
	}
	return func() {
		cancel()
		for _, rc := range conns {
			rc.c.Close()
		}
		wg.Wait()
	}
}

func waitCount(t *testing.T, n *atomic.Int64, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d within 5s", what, n.Load(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
