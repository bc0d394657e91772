package broker

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchWaiting fetches one partition from offset, long-polling up to wait
// for at least one byte.
func fetchWaiting(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, offset int64, wait time.Duration) (kmsg.FetchResponseTopicPartition, time.Duration) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = int32(wait.Milliseconds()), 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(ctx, t, cl, topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch at %d: %v", offset, err)
	}
	return resp.Topics[0].Partitions[0], time.Since(start)
}

// TestNonOwnerReadsAreTheOwners: what a broker that does not own a
// partition serves (the zone-local read of zone routing) is committed data
// only, byte for byte what the owner serves, with a high watermark never
// beyond the committed end. A fetch past its lagging view but within the
// committed end waits for the view instead of answering
// OFFSET_OUT_OF_RANGE; only an offset past the committed end is out of
// range. Broker 2 reaches etcd through a relay that delays its traffic, so
// its view lags on purpose.
func TestNonOwnerReadsAreTheOwners(t *testing.T) {
	c := newCluster(t)
	b1 := c.start(1, nil)
	b2, relay := c.startBehindRelay(2)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "same", 1)
	ctx := testCtx(t, 60*time.Second)
	for _, v := range []string{"a", "b", "c"} {
		if rp := produceUntilLeader(ctx, t, direct(cl, b1), "same", 0, oneRecord(v)); rp.ErrorCode != 0 {
			t.Fatalf("produce %s: %v", v, kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	if got, _ := fetchWaiting(ctx, t, direct(cl, b2), "same", 2, 5*time.Second); got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("broker 2 before the delay: %v, %d bytes", kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches))
	}

	const delay = 700 * time.Millisecond
	relay.Delay(delay) // broker 2 now learns of commits late
	rp := produceUntilLeader(ctx, t, direct(cl, b1), "same", 0, oneRecord("d"))
	if rp.ErrorCode != 0 || rp.BaseOffset != 3 {
		t.Fatalf("produce d: %v at %d, want offset 3", kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset)
	}
	// At the committed end, past broker 2's lagging view: no error, and the
	// committed end etcd confirmed as the high watermark (its view's 3 would
	// tell a client that already read offset 3 elsewhere that it is ahead).
	if got, _ := fetchWaiting(ctx, t, direct(cl, b2), "same", 4, 0); got.ErrorCode != 0 || got.HighWatermark != 4 {
		t.Fatalf("non-owner at the committed end 4: %v, high watermark %d, want no error and 4", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark)
	}
	owner, _ := fetchWaiting(ctx, t, direct(cl, b1), "same", 3, 5*time.Second)
	if owner.ErrorCode != 0 || owner.HighWatermark != 4 || len(owner.RecordBatches) == 0 {
		t.Fatalf("owner at 3: %v, high watermark %d, %d bytes", kerr.ErrorForCode(owner.ErrorCode), owner.HighWatermark, len(owner.RecordBatches))
	}
	// Offset 3 is committed but broker 2's view may not hold it yet.
	other, took := fetchWaiting(ctx, t, direct(cl, b2), "same", 3, 10*time.Second)
	if other.ErrorCode != 0 {
		t.Fatalf("non-owner at a committed offset past its view: %v, want records", kerr.ErrorForCode(other.ErrorCode))
	}
	if !bytes.Equal(other.RecordBatches, owner.RecordBatches) {
		t.Fatalf("non-owner served %d bytes unlike the owner's %d", len(other.RecordBatches), len(owner.RecordBatches))
	}
	if other.HighWatermark != 4 || other.LastStableOffset > 4 {
		t.Fatalf("non-owner high watermark %d, last stable %d; the committed end is 4", other.HighWatermark, other.LastStableOffset)
	}
	t.Logf("non-owner answered the lagging fetch in %v (etcd delay %v)", took, delay)
	// Past the committed end is out of range, at the owner and elsewhere.
	for _, b := range []*testBroker{b1, b2} {
		if got, _ := fetchWaiting(ctx, t, direct(cl, b), "same", 5, 0); got.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Errorf("broker %d at 5 past the end 4: %v, want OFFSET_OUT_OF_RANGE", b.ID(), kerr.ErrorForCode(got.ErrorCode))
		}
	}
}
