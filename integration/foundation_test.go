package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
)

// TestProduceConsumeThroughTwoProxies is the foundation path: three brokers,
// two proxy replicas, one real client per proxy. Records produced through
// either proxy are consumed, complete and in order, through the other.
func TestProduceConsumeThroughTwoProxies(t *testing.T) {
	c := devtest.Start(t, devcluster.Config{Brokers: 3, Proxies: 2, AutoCreateTopics: true, DefaultPartitions: 3})
	proxies := c.ProxyAddrs()
	const topic, perProxy = "foundation", 150

	var produced []record
	for i, addr := range proxies {
		cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		recs := make([]*kgo.Record, perProxy)
		for j := range recs {
			recs[j] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", j%7)), Value: []byte(fmt.Sprintf("proxy%d-%d", i, j))}
		}
		res := cl.ProduceSync(ctx, recs...)
		cancel()
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("produce %q via %s: %v", r.Record.Value, addr, r.Err)
			}
			produced = append(produced, record{r.Record.Partition, r.Record.Offset, string(r.Record.Value)})
		}
	}

	partitions := map[int32]bool{}
	for _, p := range produced {
		partitions[p.partition] = true
	}
	if len(partitions) < 2 {
		t.Fatalf("keys landed on %d partition(s); the test needs several to exercise routing", len(partitions))
	}
	for _, addr := range proxies {
		checkSame(t, produced, consumeAll(t, addr, topic, len(produced), 60*time.Second))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owners := map[int32]bool{}
	for p := range partitions {
		owner, ok, err := c.Owner(ctx, topic, p)
		if err != nil || !ok {
			t.Fatalf("partition %d has no owner in etcd after produce (ok=%v, err=%v)", p, ok, err)
		}
		owners[owner] = true
	}
	t.Logf("%d records over %d partitions, owned by %d broker(s)", len(produced), len(partitions), len(owners))
}
