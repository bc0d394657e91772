package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/store"
)

// cluster is a set of stub brokers sharing one embedded etcd and store.
type cluster struct {
	t        testing.TB
	endpoint string
	store    store.ObjectStore
	layout   layout.Layout
	admin    *clientv3.Client
	brokers  map[int32]*testBroker
}

type testBroker struct {
	*Broker
	cancel context.CancelFunc
	done   chan error
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	srv, cli := etcdtest.Start(t)
	return &cluster{t: t, endpoint: srv.Endpoint, store: store.NewMemory(), layout: layout.New("/test"),
		admin: cli, brokers: make(map[int32]*testBroker)}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("BROKER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// start runs broker id with cfg tweaks; it is stopped gracefully at the end
// of the test unless stopped or crashed before.
func (c *cluster) start(id int32, tweak func(*Config)) *testBroker {
	c.t.Helper()
	cfg := Config{
		ID: id, Etcd: etcdtest.NewClient(c.t, c.endpoint), Layout: c.layout, Store: c.store,
		LeaseTTL: 2 * time.Second, AutoCreateTopics: true, Logger: testLogger(c.t).With("id", id),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := New(ctx, cfg)
	if err != nil {
		c.t.Fatalf("start broker %d: %v", id, err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	tb := &testBroker{Broker: b, cancel: stop, done: make(chan error, 1)}
	go func() { tb.done <- b.Run(runCtx) }()
	c.brokers[id] = tb
	c.t.Cleanup(func() { c.stop(id) })
	return tb
}

// stop shuts broker id down gracefully and waits for Run to return.
func (c *cluster) stop(id int32) {
	tb := c.brokers[id]
	if tb == nil {
		return
	}
	delete(c.brokers, id)
	tb.cancel()
	select {
	case <-tb.done:
	case <-time.After(20 * time.Second):
		c.t.Errorf("broker %d: Run did not return within 20s of cancel", id)
	}
}

// crash kills broker id without releasing anything.
func (c *cluster) crash(id int32) {
	tb := c.brokers[id]
	delete(c.brokers, id)
	tb.Crash()
	tb.cancel()
	<-tb.done
}

func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.Addr())
	}
	return c.clientFor(seeds, opts...)
}

func (c *cluster) clientFor(seeds []string, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatalf("kgo client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	c.awaitDiscovered(cl, seeds)
	return cl
}

// awaitDiscovered waits (at most 10 s) until cl's metadata names as many
// brokers as it was given seeds, so that direct(cl, b) finds b: kgo knows
// brokers by id only once a metadata answer named them.
func (c *cluster) awaitDiscovered(cl *kgo.Client, seeds []string) {
	c.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(cl.DiscoveredBrokers()) < len(seeds); {
		if time.Now().After(deadline) {
			c.t.Fatalf("the client's metadata names %d brokers after 10s, want %d", len(cl.DiscoveredBrokers()), len(seeds))
		}
		cl.ForceMetadataRefresh()
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) createTopic(cl *kgo.Client, topic string, partitions int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		c.t.Fatalf("create topic %s: error code %d", topic, code)
	}
	// Like Kafka's metadata propagation, other brokers learn the topic a
	// moment later: wait so tests do not depend on the watch's speed.
	for id, b := range c.brokers {
		for {
			if _, ok := b.meta.topic(topic); ok {
				break
			}
			select {
			case <-ctx.Done():
				c.t.Fatalf("broker %d never learned topic %s", id, topic)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// consumeN reads n records from the start of topic (all partitions).
func consumeN(t *testing.T, c *cluster, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t, 30*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch error %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func recordValue(i int) []byte { return fmt.Appendf(nil, "value-%06d", i) }

func topicID(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].TopicID
}

// direct is a requestor that talks to one broker only (no routing by
// partition leader).
func direct(cl *kgo.Client, b *testBroker) kmsg.Requestor { return cl.Broker(int(b.ID())) }

func tpOf(topic string, p int32) partlog.TP { return partlog.TP{Topic: topic, Partition: p} }

func clientv3WithPrefix() clientv3.OpOption { return clientv3.WithPrefix() }
