package kafscale

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// emulate makes kfake act as KafScale's brokers, from control functions
// that only observe and adjust each request before kfake handles it:
//
//   - Produce at broker X for a partition: X takes the partition's lease
//     the way KafScale does (create if absent); if X holds it, kfake's
//     leader is moved to X, so kfake accepts the write; if another broker
//     holds it, kfake's leader is that broker and X answers
//     NOT_LEADER_OR_FOLLOWER, as KafScale does.
//
//   - Fetch, ListOffsets, OffsetForLeaderEpoch at X: KafScale takes no
//     lease and serves any partition nobody leases, so kfake's leader of
//     an unowned partition moves to X. It also ignores leader epochs:
//     CurrentLeaderEpoch is cleared (the proxy's epochs are its own), and
//     OffsetForLeaderEpoch gets the end offset whatever epoch is asked.
//
//   - a group API at X for a group nobody leases: X takes the group's
//     lease if kfake makes X its coordinator (kfake's coordinators cannot
//     be moved, so the leases follow kfake); elsewhere kfake answers
//     NOT_COORDINATOR, as KafScale does for a group another broker leases.
//
// Every partition request is logged with the lease owner it met, so that
// tests can assert which broker got what.
func (e *env) emulate() {
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.OffsetForLeaderEpoch} {
		e.fake.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			e.fake.KeepControl()
			e.handle(e.fake.CurrentNode(), req)
			return nil, nil, false
		})
	}
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.OffsetCommit, kmsg.OffsetFetch} {
		e.fake.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			e.fake.KeepControl()
			e.group(e.fake.CurrentNode(), req)
			return nil, nil, false
		})
	}
}

func (e *env) group(node int32, req kmsg.Request) {
	var groups []string
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		groups = []string{r.Group}
	case *kmsg.SyncGroupRequest:
		groups = []string{r.Group}
	case *kmsg.HeartbeatRequest:
		groups = []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		groups = []string{r.Group}
	case *kmsg.OffsetCommitRequest:
		groups = []string{r.Group}
	case *kmsg.OffsetFetchRequest:
		groups = []string{r.Group}
		for _, g := range r.Groups {
			groups = append(groups, g.Group)
		}
	}
	e.mu.Lock()
	b := e.brokers[node]
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, g := range groups {
		if g == "" || b == nil || e.fake.CoordinatorFor(g) != node {
			continue
		}
		if _, err := b.AcquireGroup(ctx, g); err != nil {
			e.t.Logf("emulation: broker %d acquiring group %s: %v", node, g, err)
		}
	}
}

func (e *env) handle(node int32, req kmsg.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			name := t.Topic
			if name == "" { // v13+: by topic id
				name = e.topicName(t.TopicID)
			}
			for _, p := range t.Partitions {
				e.produce(ctx, node, name, p.Partition)
			}
		}
	case *kmsg.FetchRequest:
		for i := range r.Topics {
			t := &r.Topics[i]
			name := t.Topic
			if name == "" { // v13+: by topic id
				name = e.topicName(t.TopicID)
			}
			for j := range t.Partitions {
				t.Partitions[j].CurrentLeaderEpoch = -1
				e.read(ctx, node, req.Key(), name, t.Partitions[j].Partition)
			}
		}
	case *kmsg.ListOffsetsRequest:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].CurrentLeaderEpoch = -1
				e.read(ctx, node, req.Key(), r.Topics[i].Topic, r.Topics[i].Partitions[j].Partition)
			}
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				rp := &r.Topics[i].Partitions[j]
				rp.CurrentLeaderEpoch = -1
				e.read(ctx, node, req.Key(), r.Topics[i].Topic, rp.Partition)
				// KafScale answers the partition's end offset whatever
				// epoch is asked; kfake does so for its current epoch.
				if info := e.fake.PartitionInfo(r.Topics[i].Topic, rp.Partition); info != nil {
					rp.LeaderEpoch = info.Epoch
				}
			}
		}
	}
}

func (e *env) topicName(id [16]byte) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.names[id]
}

// produce takes the lease for node if nobody holds it and keeps kfake's
// leader equal to the lease.
func (e *env) produce(ctx context.Context, node int32, topic string, p int32) {
	e.mu.Lock()
	b := e.brokers[node]
	held := e.held[heldKey{node, topic, p}]
	e.mu.Unlock()
	if held { // KafScale checks etcd on the first Produce only
		e.record(served{node: node, key: int16(kmsg.Produce), topic: topic, part: p, owner: node})
		e.lead(topic, p, node) // kfake reshuffles leaders when a node leaves
		return
	}
	owner := int32(-1)
	if b != nil {
		if o, err := b.AcquirePartition(ctx, topic, p); err == nil {
			owner = o
		} else {
			e.t.Logf("emulation: broker %d acquiring %s/%d: %v", node, topic, p, err)
		}
	}
	e.record(served{node: node, key: int16(kmsg.Produce), topic: topic, part: p, owner: owner})
	if owner >= 0 {
		e.lead(topic, p, owner)
	}
	if owner == node {
		e.mu.Lock()
		e.held[heldKey{node, topic, p}] = true
		e.mu.Unlock()
	}
}

// heldKey is a lease a broker took: it holds it until it shuts down.
type heldKey struct {
	node  int32
	topic string
	part  int32
}

// read serves an unowned partition from node; an owned one is served by
// its owner only (tests assert that reads never reach another broker).
func (e *env) read(ctx context.Context, node int32, key int16, topic string, p int32) {
	owner := e.owner(ctx, topic, p)
	e.record(served{node: node, key: key, topic: topic, part: p, owner: owner})
	if owner < 0 || owner == node {
		e.lead(topic, p, node)
	}
}

func (e *env) lead(topic string, p, node int32) {
	if e.fake.LeaderFor(topic, p) == node {
		return
	}
	if err := e.fake.MoveTopicPartition(topic, p, node); err != nil {
		e.t.Logf("emulation: move %s/%d to %d: %v", topic, p, node, err)
	}
}

func (e *env) record(s served) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}
