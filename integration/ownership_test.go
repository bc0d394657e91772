package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
)

// TestOwnershipMovesUnderLoad moves partitions while clients produce through
// two proxy replicas: one owner hands over gracefully, another is killed and
// its lease runs out. No producer may see an error, and every acknowledged
// record must be consumable at the offset its acknowledgement named, while
// consumers on both proxies read along without errors.
func TestOwnershipMovesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("moves ownership under load; takes a few lease TTLs")
	}
	const topic = "moves"
	c := devtest.Start(t, devcluster.Config{Brokers: 3, Proxies: 2, AutoCreateTopics: true, DefaultPartitions: 3, LeaseTTL: 2 * time.Second})
	proxies := c.ProxyAddrs()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var mu sync.Mutex
	var produced []record
	var wg sync.WaitGroup
	for i, addr := range proxies {
		cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100000; j++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				rec := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", j%11)), Value: []byte(fmt.Sprintf("p%d-%d", i, j))}
				r, err := cl.ProduceSync(ctx, rec).First()
				if err != nil {
					t.Errorf("producer via %s saw an error: %v", addr, err)
					return
				}
				mu.Lock()
				produced = append(produced, record{r.Partition, r.Offset, string(r.Value)})
				mu.Unlock()
			}
		}()
	}
	waitProduced := func(n int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			got := len(produced)
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case <-deadline:
				t.Fatalf("only %d of %d records acknowledged in time", got, n)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	// A consumer per proxy reads while ownership moves; any error it sees
	// is client-visible.
	consumed := make([]map[string]bool, len(proxies))
	for i, addr := range proxies {
		consumed[i] = map[string]bool{}
		cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100000; j++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				pollCtx, pollCancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := cl.PollFetches(pollCtx)
				pollCancel()
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						t.Errorf("consumer via %s saw an error on %s/%d: %v", addr, topic, p, err)
					}
				})
				fs.EachRecord(func(r *kgo.Record) { consumed[i][string(r.Value)] = true })
			}
		}()
	}

	waitProduced(50)
	owner := mustOwner(t, c, topic, 0)
	if err := c.StopBroker(owner); err != nil {
		t.Logf("graceful stop of broker %d: %v", owner, err)
	}
	waitProduced(150)
	owner = mustOwner(t, c, topic, 1)
	if err := c.KillBroker(owner); err != nil {
		t.Fatalf("kill broker %d: %v", owner, err)
	}
	waitProduced(300)
	close(stop)
	wg.Wait()

	for i, addr := range proxies {
		if len(consumed[i]) == 0 {
			t.Errorf("live consumer via %s read nothing while ownership moved", addr)
		}
		checkSame(t, produced, consumeAll(t, addr, topic, len(produced), 60*time.Second))
	}
	t.Logf("%d records acknowledged while ownership moved twice", len(produced))
}

func mustOwner(t *testing.T, c *devcluster.Cluster, topic string, p int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owner, ok, err := c.Owner(ctx, topic, p)
	if err != nil || !ok {
		t.Fatalf("%s/%d has no owner (ok=%v, err=%v)", topic, p, ok, err)
	}
	return owner
}
