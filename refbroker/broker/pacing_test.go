package broker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// TestAcquisitionsShareOnePacer: partitions and group coordinators draw from
// one budget of acquisitions in flight. With its only slot held (by either
// kind), a JoinGroup for a group not yet coordinated is answered
// COORDINATOR_LOAD_IN_PROGRESS and a produce to a partition not yet owned
// NOT_LEADER_OR_FOLLOWER, each once the wait passed and well before a
// client's timeout, with nothing acquired and each refusal counted; once the
// slot is free both succeed.
func TestAcquisitionsShareOnePacer(t *testing.T) {
	const wait = 200 * time.Millisecond
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.AcquiringMax, cfg.AcquireWait = 1, wait })
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "paced", 2)
	ctx := testCtx(t, 60*time.Second)
	bc := direct(cl, b)
	sc := schema.New(c.layout)

	for i, held := range []pacer.Kind{pacer.Group, pacer.Partition} {
		t.Run("held by "+held.String(), func(t *testing.T) {
			group, part := "paced-"+held.String(), int32(i)
			groupRes := lease.GroupResource(c.layout, group, sc.GroupStateKey(group))
			partRes := lease.PartitionResource(c.layout, "paced", part, sc.PartitionStateKey("paced", part))
			if node := findCoordinator(ctx, t, bc, group); node != b.ID() {
				t.Fatalf("FindCoordinator(%s) = %d; want %d", group, node, b.ID())
			}
			m := &rawMember{t: t, cl: bc, group: group}
			records := buildBatch(batchSpec{producerID: -1, values: [][]byte{[]byte("v")}})

			if !b.pacer.Take(ctx, held) {
				t.Fatal("the one free slot was refused")
			}
			refusedBefore := refusals(b)
			start := time.Now()
			if r := m.join(ctx, 10000); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
				t.Fatalf("join with no slot free = %v; want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(r.ErrorCode))
			}
			checkRefusalTime(t, "join", time.Since(start), wait)
			start = time.Now()
			if r := produceRaw(ctx, t, bc, "paced", part, -1, records); r.ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("produce with no slot free = %v; want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(r.ErrorCode))
			}
			checkRefusalTime(t, "produce", time.Since(start), wait)
			if got, want := refusals(b), [2]float64{refusedBefore[0] + 1, refusedBefore[1] + 1}; got != want {
				t.Fatalf("refusals {partition, group} = %v; want %v", got, want)
			}
			for _, res := range []lease.Resource{groupRes, partRes} {
				if _, ok := b.sess.Owns(res); ok {
					t.Fatalf("%s acquired although no slot was free", res.OwnerKey)
				}
			}

			b.pacer.Release()
			if r := m.join(ctx, 10000); r.ErrorCode != 0 {
				t.Fatalf("join with a free slot = %v; want joined", kerr.ErrorForCode(r.ErrorCode))
			}
			if r := produceRaw(ctx, t, bc, "paced", part, -1, records); r.ErrorCode != 0 || r.BaseOffset != 0 {
				t.Fatalf("produce with a free slot = %v at %d; want offset 0", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
			}
		})
	}
}

// refusals reads the broker's refused-acquisition counters {partition, group}.
func refusals(b *testBroker) [2]float64 {
	return [2]float64{
		testutil.ToFloat64(b.metrics.refused.WithLabelValues(pacer.Partition.String())),
		testutil.ToFloat64(b.metrics.refused.WithLabelValues(pacer.Group.String())),
	}
}

// checkRefusalTime fails unless a refusal came after the pacer's wait and
// long before any client timeout (the 2s bound leaves room for -race).
func checkRefusalTime(t *testing.T, what string, took, wait time.Duration) {
	t.Helper()
	if took < wait || took > 2*time.Second {
		t.Fatalf("%s refused after %v; want after the %v wait, within 2s", what, took, wait)
	}
}

func findCoordinator(ctx context.Context, t *testing.T, cl kmsg.Requestor, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("find coordinator %s: %v", group, err)
	}
	if resp.Version >= 4 {
		return resp.Coordinators[0].NodeID
	}
	return resp.NodeID
}
