package kfake

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group-side APIs of TestEveryAdvertisedVersion.

func (s *sweep) findCoordinator(t *testing.T, v int16) {
	type ask struct {
		kind int8
		keys []string
	}
	asks := []ask{{0, []string{s.group}}}
	if v >= 1 {
		asks = append(asks, ask{1, []string{"raw-txn"}})
	}
	if v >= 4 {
		asks = append(asks, ask{0, []string{s.group, "raw-other"}})
	}
	for _, a := range asks {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = v, a.kind
		if v < 4 {
			req.CoordinatorKey = a.keys[0]
		} else {
			req.CoordinatorKeys = a.keys
		}
		pr, _ := s.viaProxy(t, req).(*kmsg.FindCoordinatorResponse)
		dr, _ := s.viaKfake(t, 0, req).(*kmsg.FindCoordinatorResponse)
		if pr == nil || dr == nil {
			continue
		}
		what := fmt.Sprintf("FindCoordinator v%d type %d %v", v, a.kind, a.keys)
		if v < 4 {
			diff(t, what+" error", pr.ErrorCode, dr.ErrorCode)
			s.checkProxyNode(t, what, pr.NodeID, pr.Host, pr.Port)
			continue
		}
		if len(pr.Coordinators) != len(a.keys) {
			t.Errorf("%s through the proxy: %d coordinators for %d keys", what, len(pr.Coordinators), len(a.keys))
			continue
		}
		for i, c := range pr.Coordinators {
			if c.Key != a.keys[i] {
				t.Errorf("%s through the proxy: coordinator %d is for %q, want %q", what, i, c.Key, a.keys[i])
			}
			if i < len(dr.Coordinators) {
				diff(t, what+" error", c.ErrorCode, dr.Coordinators[i].ErrorCode)
			}
			s.checkProxyNode(t, what, c.NodeID, c.Host, c.Port)
		}
	}
}

func (s *sweep) checkProxyNode(t *testing.T, what string, node int32, host string, port int32) {
	t.Helper()
	if got, want := fmt.Sprintf("%d@%s:%d", node, host, port), "0@"+s.e.srv.Addr(); got != want {
		t.Errorf("%s through the proxy names %s, want the proxy %s", what, got, want)
	}
}

func (s *sweep) offsetCommit(t *testing.T, v int16) {
	s.commit = 100 + int64(v)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.RetentionTimeMillis = v, s.group, -1, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = s.topic, s.id
	for p := range s.parts {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Timestamp, rp.LeaderEpoch = p, s.commit, -1, -1
		rp.Metadata = kmsg.StringPtr(fmt.Sprintf("v%d", v))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	pr, _ := s.viaProxy(t, req).(*kmsg.OffsetCommitResponse)
	dr, _ := s.viaKfake(t, s.e.fake.CoordinatorFor(s.group), req).(*kmsg.OffsetCommitResponse)
	if pr == nil || dr == nil {
		return
	}
	pr.ThrottleMillis, dr.ThrottleMillis = 0, 0
	diff(t, fmt.Sprintf("OffsetCommit v%d", v), pr, dr)
	for _, rt := range pr.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Errorf("OffsetCommit v%d through the proxy: partition %d error %d", v, rp.Partition, rp.ErrorCode)
			}
		}
	}
}

func (s *sweep) offsetFetch(t *testing.T, v int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = v
	all := []int32{0, 1, 2}
	if v < 8 {
		req.Group = s.group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = s.topic, all
		req.Topics = append(req.Topics, rt)
	} else {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = s.group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.TopicID, rt.Partitions = s.topic, s.id, all
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
	}
	pr, _ := s.viaProxy(t, req).(*kmsg.OffsetFetchResponse)
	dr, _ := s.viaKfake(t, s.e.fake.CoordinatorFor(s.group), req).(*kmsg.OffsetFetchResponse)
	if pr == nil || dr == nil {
		return
	}
	pr.ThrottleMillis, dr.ThrottleMillis = 0, 0
	diff(t, fmt.Sprintf("OffsetFetch v%d", v), pr, dr)
	var offsets []int64
	for _, rt := range pr.Topics {
		for _, rp := range rt.Partitions {
			offsets = append(offsets, rp.Offset)
		}
	}
	for _, g := range pr.Groups {
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				offsets = append(offsets, rp.Offset)
			}
		}
	}
	if want := []int64{s.commit, s.commit, s.commit}; !slices.Equal(offsets, want) {
		t.Errorf("OffsetFetch v%d through the proxy: offsets %v, want %v (the last commit)", v, offsets, want)
	}
}
