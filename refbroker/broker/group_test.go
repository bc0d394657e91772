package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceN writes n records round-robin over partitions and waits for all
// acknowledgements.
func produceN(t *testing.T, cl *kgo.Client, topic string, partitions int32, from, n int) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Topic: topic, Value: recordValue(i), Partition: int32(i) % partitions}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func TestConsumerGroupOfTwoSharesAndCommits(t *testing.T) {
	c := newCluster(t)
	c.start(1, nil)
	c.start(2, nil)
	admin := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c.createTopic(admin, "grp", 4)
	ctx := testCtx(t, 60*time.Second)

	// Two members; wait until the group has split the 4 partitions among both.
	var mu sync.Mutex
	owned := make([]map[int32]bool, 2)
	assigned := make(chan struct{}, 16)
	members := make([]*kgo.Client, 2)
	for i := range members {
		owned[i] = make(map[int32]bool)
		track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				for _, p := range ps["grp"] {
					owned[i][p] = add
				}
				mu.Unlock()
				assigned <- struct{}{}
			}
		}
		members[i] = c.client(kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("grp"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.HeartbeatInterval(200*time.Millisecond), kgo.SessionTimeout(3*time.Second),
			kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(track(true)), kgo.OnPartitionsRevoked(track(false)))
	}
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	const n = 400
	seen := make(map[string]int)
	byMember := make([]int, 2)
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := m.PollFetches(pollCtx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					byMember[i]++
					mu.Unlock()
				})
				if err := m.CommitUncommittedOffsets(pollCtx); err != nil && pollCtx.Err() == nil {
					t.Logf("member %d commit: %v", i, err)
				}
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					stopPolls()
				}
			}
		}()
	}
	for split := false; !split; {
		select {
		case <-assigned:
		case <-ctx.Done():
			t.Fatalf("group never split the partitions: %v", owned)
		}
		mu.Lock()
		count := func(m map[int32]bool) (k int) {
			for _, on := range m {
				if on {
					k++
				}
			}
			return k
		}
		a, b := count(owned[0]), count(owned[1])
		split = a > 0 && b > 0 && a+b == 4
		mu.Unlock()
	}
	produceN(t, admin, "grp", 4, 0, n)
	wg.Wait()
	// The member that saw the last record stops both polls, which may cancel
	// the other member's commit of its last records: commit what is left,
	// as a consumer does before it leaves.
	for i, m := range members {
		if err := m.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("member %d final commit: %v", i, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("consumed %d distinct of %d records before timeout", len(seen), n)
	}
	if byMember[0] == 0 || byMember[1] == 0 {
		t.Fatalf("records per member %v: both members should have consumed", byMember)
	}
	for v, k := range seen {
		if k != 1 {
			t.Errorf("record %s consumed %d times", v, k)
		}
	}

	// The committed offsets cover the whole log.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g1"
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	var total int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("offset fetch %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			total += rp.Offset
		}
	}
	if total != n {
		t.Fatalf("committed offsets sum to %d, want %d", total, n)
	}
}

// joinAndSync makes one raw group member and returns its id and generation.
func joinAndSync(t *testing.T, ctx context.Context, cl *kgo.Client, groupID string) (string, int32) {
	t.Helper()
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = groupID, 10000, 10000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	var jr *kmsg.JoinGroupResponse
	for attempt := 0; attempt < 2; attempt++ {
		var err error
		if jr, err = join.RequestWith(ctx, cl); err != nil {
			t.Fatalf("join: %v", err)
		}
		if jr.ErrorCode != kerr.MemberIDRequired.Code {
			break
		}
		join.MemberID = jr.MemberID
	}
	if jr.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = groupID, jr.Generation, jr.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != 0 {
		t.Fatalf("sync: %v %v", err, kerr.ErrorForCode(sr.ErrorCode))
	}
	if string(sr.MemberAssignment) != "a" {
		t.Fatalf("sync assignment %q, want %q", sr.MemberAssignment, "a")
	}
	return jr.MemberID, jr.Generation
}

func commitOffset(ctx context.Context, t *testing.T, cl kmsg.Requestor, groupID, member string, gen int32, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = groupID, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = "t", topicID(ctx, t, cl, "t")
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("offset commit: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestOffsetCommitChecksGeneration(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.clientFor([]string{b.Addr()})
	ctx := testCtx(t, 30*time.Second)
	c.createTopic(cl, "t", 1)

	// An empty group accepts simple commits (generation -1, no member).
	if code := commitOffset(ctx, t, cl, "g", "", -1, 5); code != 0 {
		t.Fatalf("simple commit into empty group: %v", kerr.ErrorForCode(code))
	}
	member, gen := joinAndSync(t, ctx, cl, "g")
	cases := []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"stale generation", member, gen - 1, kerr.IllegalGeneration.Code},
		{"future generation", member, gen + 1, kerr.IllegalGeneration.Code},
		{"unknown member", "nobody", gen, kerr.UnknownMemberID.Code},
		{"simple commit into active group", "", -1, kerr.UnknownMemberID.Code},
		{"current generation", member, gen, 0},
	}
	for _, tc := range cases {
		if got := commitOffset(ctx, t, cl, "g", tc.member, tc.gen, 7); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
}
