// Package integration holds end-to-end tests: a real embedded etcd, stub
// brokers and proxies in one process, driven by real Kafka clients.
package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func newClient(t *testing.T, bootstrap string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.MetadataMinAge(250 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo client for %s: %v", bootstrap, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// record identifies what a test wrote: where it landed and what it held.
type record struct {
	partition int32
	offset    int64
	value     string
}

// consumeAll reads topic from the start until it has want records or the
// deadline passes; it returns what it saw per partition, in offset order.
func consumeAll(t *testing.T, bootstrap, topic string, want int, timeout time.Duration) map[int32][]record {
	t.Helper()
	cl := newClient(t, bootstrap, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := map[int32][]record{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records from %s via %s before the deadline", n, want, topic, bootstrap)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch %s/%d via %s: %v", topic, p, bootstrap, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], record{r.Partition, r.Offset, string(r.Value)})
			n++
		})
	}
	return got
}

// checkSame fails unless consumed holds exactly the produced records, at the
// offsets their acknowledgements named, in offset order per partition.
func checkSame(t *testing.T, produced []record, consumed map[int32][]record) {
	t.Helper()
	byOffset := map[string]record{}
	for _, recs := range consumed {
		for i, r := range recs {
			if i > 0 && recs[i-1].offset >= r.offset {
				t.Errorf("partition %d: offset %d after %d", r.partition, r.offset, recs[i-1].offset)
			}
			byOffset[fmt.Sprintf("%d/%d", r.partition, r.offset)] = r
		}
	}
	for _, p := range produced {
		c, ok := byOffset[fmt.Sprintf("%d/%d", p.partition, p.offset)]
		if !ok {
			t.Errorf("acknowledged %q at %d/%d was not consumed", p.value, p.partition, p.offset)
			continue
		}
		if c.value != p.value {
			t.Errorf("offset %d/%d holds %q, acknowledged for %q", p.partition, p.offset, c.value, p.value)
		}
	}
}
