package kfake

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNewerLeaderEpochPassesThrough: a client whose current leader epoch is
// newer than the leader's (its metadata ran ahead of the broker) gets
// UNKNOWN_LEADER_EPOCH from kfake at once, and retries after a backoff
// (KIP-320). Through the proxy the answer must be the same, and as quick:
// the partition's owner is right, only its epoch lags.
func TestNewerLeaderEpochPassesThrough(t *testing.T) {
	t.Parallel() // mostly waiting on the proxy's retry budgets
	const topic = "ep"
	e := newEnv(t, topicSpec{topic, 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produceKeyed(ctx, t, e.client(), topic, "ep", 10, 1)
	st := e.partitions(ctx, topic)[0]
	newer := st.epoch + 1

	cases := []struct {
		name string
		req  kmsg.Request
		// within is how soon the proxy must answer: the defects this guards
		// against took 2.5-5 s; kfake itself answers at once.
		within time.Duration
		why    string
	}{
		{"Fetch v12", newerFetch(topic, newer), time.Second, ""},
		{"ListOffsets v10", newerListOffsets(topic, newer, 10, 3000), time.Second, ""},
		{"OffsetForLeaderEpoch v4", newerEpochs(topic, newer, st.epoch), time.Second, ""},
		{"ListOffsets v8", newerListOffsets(topic, newer, 8, 0), 6 * time.Second,
			"ListOffsets before v10 has no timeout field, so its retry budget should be the proxy's RetryBudget (5s, as apis.Config documents); " +
				"kmsg's decoder fills the absent field with its default, 30000 ms, and the proxy takes that as the request's timeout"},
	}
	var wg sync.WaitGroup
	for _, tc := range cases {
		// Each case on its own connections, all at once: the proxy's retry
		// budgets run in parallel.
		px, direct := dialRaw(t, e.srv.Addr()), dialRaw(t, e.nodes[st.leader])
		wg.Go(func() {
			dr, err := direct.do(ctx, tc.req)
			if err != nil {
				t.Errorf("%s to kfake: %v", tc.name, err)
				return
			}
			want := partitionCode(dr)
			if want != kerr.UnknownLeaderEpoch.Code {
				t.Errorf("%s to kfake with current leader epoch %d (leader's: %d): %s, want UNKNOWN_LEADER_EPOCH: the reference is off", tc.name, newer, st.epoch, codeName(want))
				return
			}
			dctx, stop := context.WithTimeout(ctx, 8*time.Second)
			defer stop()
			start := time.Now()
			pr, err := px.do(dctx, tc.req)
			took := time.Since(start).Round(time.Millisecond)
			switch {
			case err != nil:
				t.Errorf("%s with current leader epoch %d (leader's: %d): no answer through the proxy within %v (%v); kfake answers %s at once. %s", tc.name, newer, st.epoch, took, err, codeName(want), tc.why)
			case partitionCode(pr) != want || took > tc.within:
				t.Errorf("%s with current leader epoch %d (leader's: %d): kfake answers %s at once; through the proxy %s after %v. "+
					"The proxy classifies UNKNOWN_LEADER_EPOCH as a definite refusal and retries on a route that avoids the owner, "+
					"i.e. on brokers that do not lead the partition, until its retry budget ends; the client gets the last refusal, late",
					tc.name, newer, st.epoch, codeName(want), codeName(partitionCode(pr)), took)
			}
			px.c.Close() // an answer still due is abandoned, not drained
		})
	}
	wg.Wait()
}

func newerFetch(topic string, current int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, -1, 500, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = current, -1, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func newerListOffsets(topic string, current int32, version int16, timeoutMillis int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = version, -1
	if version >= 10 {
		req.TimeoutMillis = timeoutMillis
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.Timestamp = current, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func newerEpochs(topic string, current, asked int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, asked
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// partitionCode is the error code of the only partition in a Fetch,
// ListOffsets or OffsetForLeaderEpoch response (-1 if the shape is off).
func partitionCode(r kmsg.Response) int16 {
	switch r := r.(type) {
	case *kmsg.FetchResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.ListOffsetsResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.OffsetForLeaderEpochResponse:
		if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			return r.Topics[0].Partitions[0].ErrorCode
		}
	}
	return -1
}

func codeName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	if code == 0 {
		return "no error"
	}
	return fmt.Sprintf("code %d", code)
}

// TestUnclaimedGroupReachesCoordinator: for a group without a coordinator
// key the proxy picks brokers by rendezvous hashing and retries after
// NOT_COORDINATOR on a route that avoids the broker that just refused. A
// kfake group has one fixed coordinator; the proxy must find it (or at
// least ask every broker before giving up) and answer what kfake answers.
func TestUnclaimedGroupReachesCoordinator(t *testing.T) {
	t.Parallel() // mostly waiting on the proxy's retry budget
	e := newEnv(t, topicSpec{"cg", 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	groups := []string{"orphan-a", "orphan-b", "orphan-c", "orphan-d", "orphan-e", "orphan-f"}

	var mu sync.Mutex
	asked := map[string][]int32{} // group -> kfake nodes asked, in order
	e.fake.ControlKey(int16(kmsg.DescribeGroups), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range req.(*kmsg.DescribeGroupsRequest).Groups {
			asked[g] = append(asked[g], e.fake.CurrentNode())
		}
		return nil, nil, false
	})

	var wg sync.WaitGroup
	for _, g := range groups {
		coord := e.fake.CoordinatorFor(g)
		px, direct := dialRaw(t, e.srv.Addr()), dialRaw(t, e.nodes[coord])
		wg.Go(func() {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Version, req.Groups = 5, []string{g}
			dr, err := direct.do(ctx, req)
			if err != nil {
				t.Errorf("DescribeGroups %s to kfake: %v", g, err)
				return
			}
			mu.Lock()
			asked[g] = nil // count the proxy's attempts only
			mu.Unlock()
			start := time.Now()
			pr, err := px.do(ctx, req)
			took := time.Since(start)
			if err != nil {
				t.Errorf("DescribeGroups %s through the proxy: %v", g, err)
				return
			}
			want, got := groupCode(dr), groupCode(pr)
			mu.Lock()
			nodes := slices.Clone(asked[g])
			mu.Unlock()
			distinct := slices.Compact(slices.Sorted(slices.Values(nodes)))
			if got != want {
				t.Errorf("DescribeGroups %s (no coordinator key; kfake's coordinator is broker %d): kfake answers %s; through the proxy %s after %v. The proxy asked brokers %v (distinct %v): each retry avoids only the broker that refused last, so it alternates between two brokers and never asks the third",
					g, coord, codeName(want), codeName(got), took.Round(time.Millisecond), nodes, distinct)
			}
		})
	}
	wg.Wait()
}

func groupCode(r kmsg.Response) int16 {
	if d, ok := r.(*kmsg.DescribeGroupsResponse); ok && len(d.Groups) == 1 {
		return d.Groups[0].ErrorCode
	}
	return -1
}
