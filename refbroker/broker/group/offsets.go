package group

import (
	"context"
	"errors"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// maxMetadataBytes is Kafka's default offset.metadata.max.bytes.
const maxMetadataBytes = 4096

// commitOffsets runs on the group goroutine: checks membership like Kafka,
// then writes the whole offset table through the fenced commit.
func (g *group) commitOffsets(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := g.commitAllowed(req)
	changes := make(map[string]map[int32]schema.GroupOffset)
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
					changes[name] = make(map[int32]schema.GroupOffset)
				}
				o := schema.GroupOffset{Offset: rp.Offset, LeaderEpoch: -1, CommitTime: now}
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
func (g *group) persist(changes map[string]map[int32]schema.GroupOffset) int16 {
	return g.persistWith(func(next map[string]map[int32]schema.GroupOffset) {
		for topic, ps := range changes {
			merged := maps.Clone(next[topic])
			if merged == nil {
				merged = make(map[int32]schema.GroupOffset)
			}
			maps.Copy(merged, ps)
			next[topic] = merged
		}
	})
}

// persistWith commits the offset table as edit leaves a copy of it (edit
// must copy any inner map it changes).
func (g *group) persistWith(edit func(next map[string]map[int32]schema.GroupOffset)) int16 {
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
	if next == nil {
		next = make(map[string]map[int32]schema.GroupOffset)
	}
	edit(next)
	val := layout.Marshal(schema.GroupState{Offsets: next})
	if _, err := s.FencedCommit(ctx, g.own, []byte(val)); err != nil {
		return g.commitError(err)
	}
	g.offsets = next
	return 0
}

// deleteOffsets is OffsetDelete: offsets of topics no member consumes are
// removed.
func (g *group) deleteOffsets(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	switch {
	case len(g.members) == 0 && len(g.offsets) == 0:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	case len(g.members) > 0 && g.protocolType != "consumer":
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	subscribed := g.subscribedTopics()
	drop := make(map[string][]int32)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if subscribed[rt.Topic] {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else {
				drop[rt.Topic] = append(drop[rt.Topic], rp.Partition)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(drop) == 0 {
		return resp
	}
	code := g.persistWith(func(next map[string]map[int32]schema.GroupOffset) {
		for topic, ps := range drop {
			kept := maps.Clone(next[topic])
			for _, p := range ps {
				delete(kept, p)
			}
			if len(kept) == 0 {
				delete(next, topic)
			} else {
				next[topic] = kept
			}
		}
	})
	if code != 0 {
		for ti := range resp.Topics {
			for pi := range resp.Topics[ti].Partitions {
				if p := &resp.Topics[ti].Partitions[pi]; p.ErrorCode == 0 {
					p.ErrorCode = code
				}
			}
		}
	}
	return resp
}

// subscribedTopics are the topics the members of a consumer group say they
// consume (from their protocol metadata).
func (g *group) subscribedTopics() map[string]bool {
	out := make(map[string]bool)
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadata(g.protocol)); err != nil {
			continue
		}
		for _, t := range md.Topics {
			out[t] = true
		}
	}
	return out
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
	var st schema.GroupState
	if len(state) > 0 {
		if err := layout.Unmarshal(state, &st); err != nil {
			return err
		}
	}
	g.offsets = st.Offsets
	if g.offsets == nil {
		g.offsets = make(map[string]map[int32]schema.GroupOffset)
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
	offset    schema.GroupOffset
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
