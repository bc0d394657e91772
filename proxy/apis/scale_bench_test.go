package apis

import (
	"context"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/routing"
)

// scaleTable is testTable with topic "t" grown to n partitions, owned as
// owner() says (1 + p%3), so that one request can name thousands.
func scaleTable(n int32) *routing.Table {
	rt := testTable()
	rt.SetTopic(routing.Topic{Name: "t", ID: topicID("t"), Partitions: n})
	for p := range n {
		rt.SetOwner("t", p, owner("t", p))
		rt.SetEpoch("t", p, 5)
	}
	return rt
}

func partsUpTo(n int32) []int32 {
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}

// produceOnce sends body through d once and fails on an empty reply.
func produceOnce(tb testing.TB, d *Dispatcher, body []byte) {
	ctx := context.Background()
	reply, err := d.Begin(ctx, 1, Header{Key: int16(kmsg.Produce), Version: 9}, body).Finish(ctx)
	if err != nil || len(replyBytes(reply)) == 0 {
		tb.Fatalf("reply %d bytes, err %v", len(replyBytes(reply)), err)
	}
}

// BenchmarkProduceSplit10kx3: one produce naming 10,000 partitions (100
// bytes of records each) owned by 3 brokers, split, answered and merged;
// ns/partition and allocs/partition are the per-partition cost.
func BenchmarkProduceSplit10kx3(b *testing.B) {
	const n = 10_000
	d, body := benchProduceOn(b, scaleTable(n), partsUpTo(n), 100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var ms0, ms1 allocCount
	ms0.read()
	b.ResetTimer()
	for b.Loop() {
		produceOnce(b, d, body)
	}
	b.StopTimer()
	ms1.read()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/partition")
	b.ReportMetric(float64(ms1.mallocs-ms0.mallocs)/float64(b.N)/n, "allocs/partition")
}

// TestProduceSplitCostLinear: the split, retry and merge of a produce must
// not cost more per partition when it names more partitions. Allocations
// are counted, not time: they are deterministic where time is not.
func TestProduceSplitCostLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("builds requests of 10,000 partitions")
	}
	perPart := func(n int32) float64 {
		d, body := benchProduceOn(t, scaleTable(n), partsUpTo(n), 16)
		checkMergedProduce(t, d, body, n)
		return testing.AllocsPerRun(5, func() { produceOnce(t, d, body) }) / float64(n)
	}
	small, large := perPart(1_000), perPart(10_000)
	t.Logf("allocations per partition: %.3f at 1,000 partitions, %.3f at 10,000", small, large)
	// Fixed per-request allocations make the small request's figure the
	// larger one; slack of 10% covers slice growth rounding.
	if large > small*1.1 {
		t.Fatalf("allocations per partition grew from %.3f (1,000 partitions) to %.3f (10,000): the cost is superlinear", small, large)
	}
}

// checkMergedProduce sends body once and checks that the merged answer names
// every one of its n partitions, none with an error.
func checkMergedProduce(t *testing.T, d *Dispatcher, body []byte, n int32) {
	t.Helper()
	ctx := context.Background()
	reply, err := d.Begin(ctx, 1, Header{Key: int16(kmsg.Produce), Version: 9}, body).Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 9
	if err := resp.ReadFrom(replyBytes(reply)); err != nil {
		t.Fatalf("merged answer of %d partitions: %v", n, err)
	}
	seen := make(map[int32]bool, n)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error code %d", p.Partition, p.ErrorCode)
			}
			seen[p.Partition] = true
		}
	}
	if int32(len(seen)) != n {
		t.Fatalf("merged answer names %d partitions, want %d", len(seen), n)
	}
}

// allocCount reads the process's heap allocation count.
type allocCount struct{ mallocs uint64 }

func (a *allocCount) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.mallocs = ms.Mallocs
}
