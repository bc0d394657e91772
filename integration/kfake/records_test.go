package kfake

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// rec is one record as acknowledged or as consumed.
type rec struct {
	partition int32
	offset    int64
	key       string
	value     string
}

func (r rec) String() string {
	return fmt.Sprintf("%s=%s@%d/%d", r.key, r.value, r.partition, r.offset)
}

// acker collects the acknowledgements of asynchronous produces.
type acker struct {
	mu   sync.Mutex
	acks []rec
	errs []error
}

func (a *acker) promise(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs = append(a.errs, fmt.Errorf("produce %s=%s to partition %d: %w", r.Key, r.Value, r.Partition, err))
		return
	}
	a.acks = append(a.acks, rec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
}

func (a *acker) result() ([]rec, []error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.acks), slices.Clone(a.errs)
}

// produceKeyed produces n records with keys key-0..key-(keys-1) and values
// prefix-i, waits for every acknowledgement and fails the test on any error.
func produceKeyed(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n, keys int) []rec {
	t.Helper()
	var a acker
	for i := range n {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", i%keys), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
		cl.Produce(ctx, r, a.promise)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush %d records to %s: %v", n, topic, err)
	}
	acks, errs := a.result()
	for _, err := range errs {
		t.Errorf("%v", err)
	}
	if len(acks) != n {
		t.Fatalf("%d of %d produces to %s acknowledged", len(acks), n, topic)
	}
	return acks
}

// consume reads from cl until it has want records or ctx ends; the result
// is per partition in the order delivered.
func consume(ctx context.Context, t *testing.T, cl *kgo.Client, want int) map[int32][]rec {
	t.Helper()
	got := map[int32][]rec{}
	n := 0
	for n < want {
		fs := cl.PollRecords(ctx, want-n)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", n, want)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Errorf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], rec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
			n++
		})
	}
	return got
}

// consumeFromStart reads want records of topic from the beginning through a
// new client made by mk.
func consumeFromStart(ctx context.Context, t *testing.T, mk func(...kgo.Opt) *kgo.Client, topic string, want int) map[int32][]rec {
	t.Helper()
	cl := mk(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	defer cl.Close()
	return consume(ctx, t, cl, want)
}

// checkAcked fails unless consumed holds every acknowledged record at the
// offset its acknowledgement named, each partition in strictly increasing
// offset order, and nothing else.
func checkAcked(t *testing.T, via string, acks []rec, consumed map[int32][]rec) {
	t.Helper()
	at := map[[2]int64]rec{}
	total := 0
	for p, rs := range consumed {
		for i, r := range rs {
			if i > 0 && rs[i-1].offset >= r.offset {
				t.Errorf("%s: partition %d delivered offset %d after %d", via, p, r.offset, rs[i-1].offset)
			}
			at[[2]int64{int64(p), r.offset}] = r
			total++
		}
	}
	for _, a := range acks {
		c, ok := at[[2]int64{int64(a.partition), a.offset}]
		switch {
		case !ok:
			t.Errorf("%s: acknowledged %s was not consumed", via, a)
		case c.key != a.key || c.value != a.value:
			t.Errorf("%s: offset %d/%d holds %s, acknowledged for %s", via, a.partition, a.offset, c, a)
		}
	}
	if total != len(acks) {
		t.Errorf("%s: consumed %d records, %d were acknowledged", via, total, len(acks))
	}
}

// checkKeyOrder fails unless every key stays in one partition and its
// values (prefix-seq) were consumed in the order they were produced.
func checkKeyOrder(t *testing.T, via string, consumed map[int32][]rec) {
	t.Helper()
	last := map[string]int{}
	keyPart := map[string]int32{}
	for p, rs := range consumed {
		for _, r := range rs {
			i := strings.LastIndexByte(r.value, '-')
			seq, err := strconv.Atoi(r.value[i+1:])
			if i < 0 || err != nil {
				t.Fatalf("%s: value %q has no sequence number", via, r.value)
			}
			k := r.value[:i] + "/" + r.key
			if q, ok := keyPart[k]; ok && q != p {
				t.Errorf("%s: key %s in partitions %d and %d", via, r.key, q, p)
			}
			keyPart[k] = p
			if prev, ok := last[k]; ok && prev >= seq {
				t.Errorf("%s: key %s: %s consumed after sequence %d", via, r.key, r.value, prev)
			}
			last[k] = seq
		}
	}
}

// sameRecords fails unless a and b hold the same records at the same
// offsets.
func sameRecords(t *testing.T, what string, got, want map[int32][]rec) {
	t.Helper()
	parts := map[int32]bool{}
	for p := range got {
		parts[p] = true
	}
	for p := range want {
		parts[p] = true
	}
	for p := range parts {
		if !slices.Equal(got[p], want[p]) {
			t.Errorf("%s: partition %d differs:\n got  %v\n want %v", what, p, head(got[p]), head(want[p]))
		}
	}
}

// head shortens a record list for a failure message.
func head(rs []rec) []rec {
	if len(rs) > 8 {
		return rs[:8]
	}
	return rs
}
