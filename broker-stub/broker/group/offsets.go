package group

import (
	"context"
	"errors"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/broker-stub/lease"
	"github.com/kproxy/kproxy/layout"
)

// maxMetadataBytes is Kafka's default offset.metadata.max.bytes.
const maxMetadataBytes = 4096

// commitOffsets runs on the group goroutine: checks membership like Kafka,
// then writes the whole offset table through the fenced commit.
func (g *group) commitOffsets(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := g.commitAllowed(req)
	changes := make(map[string]map[int32]layout.GroupOffset)
	codes := make([][]int16, len(req.Topics))
	now := g.c.cfg.Now().UnixMilli()
	for ti, rt := range req.Topics {
		codes[ti] = make([]int16, len(rt.Partitions))
		name, ok := rt.Topic, true
		if req.Version >= 10 {
			name, ok = g.c.cfg.Topics.Name(rt.TopicID)
		}
		for pi, rp := range rt.Partitions {
			switch {
			case code != 0:
				codes[ti][pi] = code
			case !ok:
				codes[ti][pi] = kerr.UnknownTopicID.Code
			case rp.Metadata != nil && len(*rp.Metadata) > maxMetadataBytes:
				codes[ti][pi] = kerr.OffsetMetadataTooLarge.Code
			default:
				if changes[name] == nil {
					changes[name] = make(map[int32]layout.GroupOffset)
				}
				o := layout.GroupOffset{Offset: rp.Offset, LeaderEpoch: -1, CommitTime: now}
				if req.Version >= 6 {
					o.LeaderEpoch = rp.LeaderEpoch
				}
				if rp.Metadata != nil {
					o.Metadata = *rp.Metadata
				}
				changes[name][rp.Partition] = o
			}
		}
	}
	if len(changes) > 0 {
		if pc := g.persist(changes); pc != 0 {
			for ti := range codes {
				for pi := range codes[ti] {
					if codes[ti][pi] == 0 {
						codes[ti][pi] = pc
					}
				}
			}
		}
	}
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[ti][pi]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// commitAllowed is Kafka's order of checks: simple (generation < 0)
// commits only into an empty group; members must be known and current.
func (g *group) commitAllowed(req *kmsg.OffsetCommitRequest) int16 {
	if req.Version == 0 || (req.Generation < 0 && g.state == Empty) {
		return 0
	}
	if g.state == CompletingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	m, code := g.checkMember(req.MemberID, req.Generation)
	if code == 0 {
		m.deadline = g.c.cfg.Now().Add(m.session)
	}
	return code
}

// persist commits the offset table with changes applied; 0 or the error
// code for every change. A lost coordinator stops the group.
func (g *group) persist(changes map[string]map[int32]layout.GroupOffset) int16 {
	ctx, cancel := context.WithTimeout(g.c.ctx, g.c.cfg.OpTimeout)
	defer cancel()
	s := g.c.cfg.Session
	if g.own.NeedsReread() {
		if err := s.Reread(ctx, g.own); err != nil {
			return g.commitError(err)
		}
		if err := g.load(g.own.State); err != nil {
			g.c.log.Warn("group state unreadable after re-read", "group", g.id, "err", err)
			return kerr.CoordinatorNotAvailable.Code
		}
	}
	next := maps.Clone(g.offsets)
	for topic, ps := range changes {
		merged := maps.Clone(next[topic])
		if merged == nil {
			merged = make(map[int32]layout.GroupOffset)
		}
		maps.Copy(merged, ps)
		next[topic] = merged
	}
	val := layout.Marshal(layout.GroupState{Offsets: next})
	if _, err := s.FencedCommit(ctx, g.own, []byte(val)); err != nil {
		return g.commitError(err)
	}
	g.offsets = next
	return 0
}

func (g *group) commitError(err error) int16 {
	g.c.log.Warn("group commit failed", "group", g.id, "err", err)
	switch {
	case errors.Is(err, lease.ErrAmbiguous):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, lease.ErrFenced), errors.Is(err, lease.ErrNotOwner), errors.Is(err, lease.ErrClosed):
		g.c.forget(g)
		g.halt()
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

func (g *group) load(state []byte) error {
	var st layout.GroupState
	if len(state) > 0 {
		if err := layout.Unmarshal(state, &st); err != nil {
			return err
		}
	}
	g.offsets = st.Offsets
	if g.offsets == nil {
		g.offsets = make(map[string]map[int32]layout.GroupOffset)
	}
	return nil
}

// fetchedTopic is one topic of an OffsetFetch answer, version independent.
type fetchedTopic struct {
	name       string
	id         [16]byte
	partitions []fetchedPartition
}

type fetchedPartition struct {
	partition int32
	offset    layout.GroupOffset
	known     bool
	code      int16
}

// fetchOffsets answers for the requested topics (nil: every committed one).
func (g *group) fetchOffsets(topics []fetchedTopic, all bool) []fetchedTopic {
	if all {
		topics = nil
		for name, ps := range g.offsets {
			ft := fetchedTopic{name: name}
			ft.id, _ = g.c.cfg.Topics.ID(name)
			for p := range ps {
				ft.partitions = append(ft.partitions, fetchedPartition{partition: p})
			}
			topics = append(topics, ft)
		}
	}
	for ti := range topics {
		t := &topics[ti]
		for pi := range t.partitions {
			fp := &t.partitions[pi]
			if fp.code == 0 {
				fp.offset, fp.known = g.offsets[t.name][fp.partition]
			}
		}
	}
	return topics
}
