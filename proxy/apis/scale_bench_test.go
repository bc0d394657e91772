package apis

import (
	"context"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
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

// splitCase is one client request shape of the split-cost checks: build
// returns a dispatcher whose brokers answer it and the request naming n
// partitions of topic "t".
type splitCase struct {
	name  string
	h     Header
	build func(tb testing.TB, n int32) (*Dispatcher, []byte)
}

var (
	produceHeader = Header{Key: int16(kmsg.Produce), Version: 9}
	fetchHeader   = Header{Key: int16(kmsg.Fetch), Version: 12}
)

// waitForAll is a fetch MinBytes no answer reaches: the fetch ends when
// every broker answered, never early, so each run does the same work.
const waitForAll = 1 << 30

var splitCases = []splitCase{
	{"produce", produceHeader, func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return benchProduceOn(tb, scaleTable(n), partsUpTo(n), 16)
	}},
	{"fetch", fetchHeader, func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return benchFetchOn(tb, scaleTable(n), partsUpTo(n), 16, waitForAll)
	}},
	{"produce retried", produceHeader, func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return rotatingDispatcher(tb, produceHeader, n), produceBody(partsUpTo(n), 16)
	}},
	{"fetch retried", fetchHeader, func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return rotatingDispatcher(tb, fetchHeader, n), fetchBody(partsUpTo(n), waitForAll)
	}},
}

// sendOnce sends body through d once and fails on an empty reply.
func sendOnce(tb testing.TB, d *Dispatcher, h Header, body []byte) {
	ctx := context.Background()
	reply, err := d.Begin(ctx, 1, h, body).Finish(ctx)
	if n := written(reply); err != nil || n == 0 {
		tb.Fatalf("reply %d bytes, err %v", n, err)
	}
}

// benchSplit10kx3 runs one request naming 10,000 partitions owned by 3
// brokers; ns/partition and allocs/partition are the per-partition cost.
func benchSplit10kx3(b *testing.B, c splitCase) {
	const n = 10_000
	d, body := c.build(b, n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var ms0, ms1 allocCount
	ms0.read()
	b.ResetTimer()
	for b.Loop() {
		sendOnce(b, d, c.h, body)
	}
	b.StopTimer()
	ms1.read()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/partition")
	b.ReportMetric(float64(ms1.mallocs-ms0.mallocs)/float64(b.N)/n, "allocs/partition")
}

// BenchmarkProduceSplit10kx3: one produce naming 10,000 partitions (100
// bytes of records each) owned by 3 brokers, split, answered and merged.
func BenchmarkProduceSplit10kx3(b *testing.B) {
	benchSplit10kx3(b, splitCase{h: produceHeader, build: func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return benchProduceOn(tb, scaleTable(n), partsUpTo(n), 100)
	}})
}

// BenchmarkFetchSplit10kx3: one fetch naming 10,000 partitions owned by 3
// brokers, each answering 100 bytes of records per partition, split and
// merged (MinBytes 1, as clients send).
func BenchmarkFetchSplit10kx3(b *testing.B) {
	benchSplit10kx3(b, splitCase{h: fetchHeader, build: func(tb testing.TB, n int32) (*Dispatcher, []byte) {
		return benchFetchOn(tb, scaleTable(n), partsUpTo(n), 100, 1)
	}})
}

// TestSplitCostLinear: the split, retry and merge of a produce or a fetch
// must not cost more per partition when it names more partitions, whether
// every partition is answered at once or each is refused
// NOT_LEADER_OR_FOLLOWER once and retried on its new owner. Allocations are
// counted, not time: they are deterministic where time is not.
func TestSplitCostLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("builds requests of 10,000 partitions")
	}
	for _, c := range splitCases {
		t.Run(c.name, func(t *testing.T) {
			perPart := func(n int32) float64 {
				d, body := c.build(t, n)
				checkAllAnswered(t, d, c.h, body, n)
				return testing.AllocsPerRun(5, func() { sendOnce(t, d, c.h, body) }) / float64(n)
			}
			small, large := perPart(1_000), perPart(10_000)
			t.Logf("allocations per partition: %.4f at 1,000 partitions, %.4f at 10,000", small, large)
			// Fixed per-request allocations make the small request's figure
			// the larger one; slack of 10% covers slice growth rounding.
			if large > small*1.1 {
				t.Fatalf("allocations per partition grew from %.4f (1,000 partitions) to %.4f (10,000): the cost is superlinear", small, large)
			}
		})
	}
}

// checkAllAnswered sends body once and checks that the merged answer names every
// one of its n partitions, none with an error.
func checkAllAnswered(t *testing.T, d *Dispatcher, h Header, body []byte, n int32) {
	t.Helper()
	ctx := context.Background()
	reply, err := d.Begin(ctx, 1, h, body).Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	resp := decodeReply(t, req, replyBytes(reply))
	api := partAPIFor(kmsg.Key(h.Key))
	seen := make(map[int32]bool, n)
	for _, a := range api.resp(resp) {
		if a.code != 0 {
			t.Fatalf("partition %d: error code %d", a.part, a.code)
		}
		seen[a.part] = true
	}
	if int32(len(seen)) != n {
		t.Fatalf("merged answer names %d partitions, want %d", len(seen), n)
	}
}

// rotation answers as brokers do while partitions move: the first
// sub-request each broker gets for a client request is refused
// NOT_LEADER_OR_FOLLOWER for every partition it names, which routing then
// moves to the next broker (b%3+1), and that broker answers their retry.
// Owners thus rotate by one broker per client request, so every request
// retries every partition once. The engine sends every first-round
// sub-request before it waits for any, so a request's first three sends are
// its first round and the next three its retries.
type rotation struct {
	rt         *routing.Table
	classes    [3][]int32 // partitions of "t" by p%3
	refuse, ok [3]*canned // answers naming one class
	shift      int32      // broker b owns class (b-1-shift) mod 3
	sends      int        // of the current client request
}

// rotatingDispatcher is a dispatcher on a table of n partitions whose
// brokers answer h requests naming all of them as rotation says.
func rotatingDispatcher(tb testing.TB, h Header, n int32) *Dispatcher {
	rt := scaleTable(n)
	key := kmsg.Key(h.Key)
	d, s := cannedDispatcher(tb, rt, key, h.Version, nil, 0)
	r := &rotation{rt: rt}
	f := newFake(tb)
	for j := int32(0); j < 3; j++ {
		r.classes[j] = ownedBy(partsUpTo(n), j+1)
		r.refuse[j] = cannedAnswer(f, j+1, key, h.Version, r.classes[j], 0, kerr.NotLeaderForPartition.Code)
		r.ok[j] = cannedAnswer(f, j+1, key, h.Version, r.classes[j], 16, 0)
	}
	s.rot = r
	return d
}

func (r *rotation) answer(broker int32) *canned {
	var a *canned
	if r.sends < 3 {
		j := mod3(broker - 1 - r.shift)
		for _, p := range r.classes[j] {
			r.rt.SetOwner("t", p, broker%3+1)
		}
		a = r.refuse[j]
	} else {
		a = r.ok[mod3(broker-2-r.shift)]
	}
	if r.sends++; r.sends == 6 {
		r.sends, r.shift = 0, r.shift+1
	}
	return a
}

func mod3(x int32) int32 { return ((x % 3) + 3) % 3 }

// allocCount reads the process's heap allocation count.
type allocCount struct{ mallocs uint64 }

func (a *allocCount) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a.mallocs = ms.Mallocs
}
