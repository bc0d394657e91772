package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func oneRecord(v string) []byte {
	return buildBatch(batchSpec{producerID: -1, values: [][]byte{[]byte(v)}})
}

// Two brokers race for one partition while producers write to both and the
// ownership is yanked away repeatedly behind the owner's back: every
// acknowledged record is readable at its acknowledged offset, and offsets
// are unique and contiguous.
func TestTwoBrokersRaceForPartition(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "race", 1)
	ctx := testCtx(t, 60*time.Second)

	var mu sync.Mutex
	acked := make(map[int64]string)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		target := direct(cl, []*testBroker{b1, b2}[w%2])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				rp := produceRaw(ctx, t, target, "race", 0, -1, oneRecord(v))
				if rp.ErrorCode != 0 {
					continue
				}
				mu.Lock()
				if prev, dup := acked[rp.BaseOffset]; dup {
					t.Errorf("offset %d acknowledged twice: %s and %s", rp.BaseOffset, prev, v)
				}
				acked[rp.BaseOffset] = v
				mu.Unlock()
			}
		}()
	}
	// Delete the owner key directly in etcd: the owner still believes it owns
	// the partition, so only the fence can stop its next commit.
	owner := c.layout.OwnerKey("race", 0)
	for flap := 0; flap < 15; flap++ {
		time.Sleep(100 * time.Millisecond)
		if _, err := c.admin.Delete(ctx, owner); err != nil {
			t.Fatalf("delete owner key: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no produce was acknowledged")
	}
	checkLog(t, direct(cl, b2), "race", acked)
	t.Logf("%d records acknowledged", len(acked))
}

// checkLog reads the whole partition and checks every acknowledged offset
// holds its record (readAll checks contiguity).
func checkLog(t *testing.T, cl kmsg.Requestor, topic string, acked map[int64]string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	recs := readAll(ctx, t, cl, topic, 0)
	seen := make(map[string]bool)
	for i, r := range recs {
		if int64(r.OffsetDelta) != int64(i) {
			t.Fatalf("record %d has offset %d: offsets not contiguous", i, r.OffsetDelta)
		}
		if seen[string(r.Value)] {
			t.Fatalf("record %s stored twice", r.Value)
		}
		seen[string(r.Value)] = true
	}
	for off, v := range acked {
		if off >= int64(len(recs)) || string(recs[off].Value) != v {
			t.Fatalf("acknowledged %s at offset %d is not there (log has %d records)", v, off, len(recs))
		}
	}
}

// The owner dies without releasing; the successor, which served a fetch of
// the partition before, continues exactly at the committed end.
func TestSuccessorContinuesAfterOwnerCrash(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "crash", 1)
	ctx := testCtx(t, 60*time.Second)
	acked := make(map[int64]string)
	for i := range 10 {
		v := fmt.Sprintf("before-%d", i)
		rp := produceUntilLeader(ctx, t, direct(cl, b1), "crash", 0, oneRecord(v))
		if rp.ErrorCode != 0 {
			t.Fatalf("produce to owner: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
		acked[rp.BaseOffset] = v
	}
	// Broker 2 serves the partition before it owns it.
	if p := fetchRaw(ctx, t, direct(cl, b2), "crash", 0, 0); p.ErrorCode != 0 {
		t.Fatalf("fetch from non-owner: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if rp := produceRaw(ctx, t, direct(cl, b2), "crash", 0, -1, oneRecord("refused")); rp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to non-owner: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(rp.ErrorCode))
	}
	c.crash(1)
	for i := range 5 {
		v := fmt.Sprintf("after-%d", i)
		rp := produceUntilLeader(ctx, t, direct(cl, b2), "crash", 0, oneRecord(v))
		if rp.ErrorCode != 0 {
			t.Fatalf("produce to successor: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
		if want := int64(10 + i); rp.BaseOffset != want {
			t.Fatalf("successor wrote at offset %d, want %d", rp.BaseOffset, want)
		}
		acked[rp.BaseOffset] = v
	}
	checkLog(t, direct(cl, b2), "crash", acked)
}

// A gracefully stopped owner hands its partitions over at once.
func TestGracefulShutdownHandsOver(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "handover", 1)
	ctx := testCtx(t, 30*time.Second)
	if rp := produceUntilLeader(ctx, t, direct(cl, b1), "handover", 0, oneRecord("first")); rp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	c.stop(1)
	start := time.Now()
	rp := produceUntilLeader(ctx, t, direct(cl, b2), "handover", 0, oneRecord("second"))
	took := time.Since(start)
	if rp.ErrorCode != 0 || rp.BaseOffset != 1 {
		t.Fatalf("successor produce: offset %d, %v; want offset 1", rp.BaseOffset, kerr.ErrorForCode(rp.ErrorCode))
	}
	if took > time.Second {
		t.Fatalf("successor took %v to take over, want < 1s", took)
	}
	t.Logf("takeover after graceful stop: %v", took)
}

// An idempotent batch retried on the new owner after a failover is answered
// with its original offset, not written again.
func TestIdempotentRetryAfterFailover(t *testing.T) {
	c := newCluster(t)
	b1, b2 := c.start(1, nil), c.start(2, nil)
	cl := c.clientFor([]string{b1.Addr(), b2.Addr()})
	c.createTopic(cl, "idem", 1)
	ctx := testCtx(t, 60*time.Second)
	init := kmsg.NewPtrInitProducerIDRequest()
	ir, err := init.RequestWith(ctx, direct(cl, b1))
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("init producer id: %v %v", err, ir)
	}
	pid := ir.ProducerID
	batch := func(epoch int16, seq int32, vals ...string) []byte {
		s := batchSpec{producerID: pid, producerEpoch: epoch, firstSeq: seq}
		for _, v := range vals {
			s.values = append(s.values, []byte(v))
		}
		return buildBatch(s)
	}
	if rp := produceUntilLeader(ctx, t, direct(cl, b1), "idem", 0, oneRecord("plain")); rp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	first := batch(0, 0, "a", "b", "c")
	rp := produceRaw(ctx, t, direct(cl, b1), "idem", 0, -1, first)
	if rp.ErrorCode != 0 || rp.BaseOffset != 1 {
		t.Fatalf("idempotent produce: offset %d %v, want 1", rp.BaseOffset, kerr.ErrorForCode(rp.ErrorCode))
	}
	c.crash(1)
	steps := []struct {
		name    string
		records []byte
		code    int16
		offset  int64
	}{
		{"retry of the first batch", first, 0, 1},
		{"next batch", batch(0, 3, "d"), 0, 4},
		{"retry of an older batch", first, 0, 1},
		{"gap in sequence", batch(0, 9, "x"), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"new epoch must start at 0", batch(1, 5, "x"), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"new epoch", batch(1, 0, "e"), 0, 5},
		{"old epoch", batch(0, 4, "x"), kerr.InvalidProducerEpoch.Code, -1},
	}
	for _, s := range steps {
		rp := produceUntilLeader(ctx, t, direct(cl, b2), "idem", 0, s.records)
		if rp.ErrorCode != s.code || (s.code == 0 && rp.BaseOffset != s.offset) {
			t.Fatalf("%s: offset %d %v, want offset %d %v", s.name, rp.BaseOffset,
				kerr.ErrorForCode(rp.ErrorCode), s.offset, kerr.ErrorForCode(s.code))
		}
	}
	if end, _ := listOffset(ctx, t, direct(cl, b2), "idem", 0, -1); end != 6 {
		t.Fatalf("log end %d, want 6: a retried batch was written twice", end)
	}
}
