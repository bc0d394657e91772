package group

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// offsetFetch serves v0-v7 (one group) and v8+ (batched groups).
func (c *Coordinator) offsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []fetchedTopic
		for _, rt := range req.Topics {
			topics = append(topics, requestedTopic(rt.Topic, [16]byte{}, rt.Partitions))
		}
		got, code := c.fetchGroup(ctx, req.Group, topics, req.Topics == nil)
		if code == -1 {
			return nil
		}
		resp.ErrorCode = code
		for _, ft := range got {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = ft.name
			for _, fp := range ft.partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = fp.partition, -1, -1, fp.code
				if code != 0 && req.Version < 2 {
					sp.ErrorCode = code
				}
				if fp.known {
					sp.Offset, sp.LeaderEpoch = fp.offset.Offset, fp.offset.LeaderEpoch
					md := fp.offset.Metadata
					sp.Metadata = &md
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	for _, rg := range req.Groups {
		var topics []fetchedTopic
		for _, rt := range rg.Topics {
			name := rt.Topic
			if req.Version >= 10 {
				var ok bool
				if name, ok = c.cfg.Topics.Name(rt.TopicID); !ok {
					ft := requestedTopic("", rt.TopicID, rt.Partitions)
					for i := range ft.partitions {
						ft.partitions[i].code = kerr.UnknownTopicID.Code
					}
					topics = append(topics, ft)
					continue
				}
			}
			topics = append(topics, requestedTopic(name, rt.TopicID, rt.Partitions))
		}
		got, code := c.fetchGroup(ctx, rg.Group, topics, rg.Topics == nil)
		if code == -1 {
			return nil
		}
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group, sg.ErrorCode = rg.Group, code
		for _, ft := range got {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID = ft.name, ft.id
			for _, fp := range ft.partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = fp.partition, -1, -1, fp.code
				if fp.known {
					sp.Offset, sp.LeaderEpoch = fp.offset.Offset, fp.offset.LeaderEpoch
					md := fp.offset.Metadata
					sp.Metadata = &md
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

func requestedTopic(name string, id [16]byte, partitions []int32) fetchedTopic {
	ft := fetchedTopic{name: name, id: id}
	for _, p := range partitions {
		ft.partitions = append(ft.partitions, fetchedPartition{partition: p})
	}
	return ft
}

// fetchGroup reads offsets of one group; code -1 means ctx ended.
func (c *Coordinator) fetchGroup(ctx context.Context, id string, topics []fetchedTopic, all bool) ([]fetchedTopic, int16) {
	g, code := c.get(ctx, id)
	if code != 0 {
		return topics, code
	}
	var got []fetchedTopic
	_, code = call(ctx, g, func(reply chan kmsg.Response) {
		got = g.fetchOffsets(topics, all)
		reply <- nil
	})
	if code != 0 {
		return topics, code
	}
	return got, 0
}

func (c *Coordinator) describe(ctx context.Context, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		g, code := c.get(ctx, id)
		if code == 0 {
			_, code = call(ctx, g, func(reply chan kmsg.Response) {
				g.describe(&dg)
				reply <- nil
			})
		}
		if code == -1 {
			return nil
		}
		dg.ErrorCode = code
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *group) describe(dg *kmsg.DescribeGroupsResponseGroup) {
	dg.State, dg.ProtocolType = string(g.state), g.protocolType
	if g.state == Empty && len(g.offsets) == 0 {
		dg.State = string(Dead) // Kafka describes a group it does not know as Dead
	}
	if g.state == Stable {
		dg.Protocol = g.protocol
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.host
		if m.instanceID != "" {
			dm.InstanceID = &m.instanceID
		}
		if g.state == Stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
		}
		dg.Members = append(dg.Members, dm)
	}
}

// list answers ListGroups with the groups this broker coordinates.
func (c *Coordinator) list(req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	gs := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	for _, g := range gs {
		s := g.summary()
		if len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, string(s.state)) {
			continue
		}
		if len(req.TypesFilter) > 0 && !slices.Contains(req.TypesFilter, "classic") {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, s.protocolType, string(s.state), "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int {
		switch {
		case a.Group < b.Group:
			return -1
		case a.Group > b.Group:
			return 1
		}
		return 0
	})
	return resp
}

// deleteGroups empties the offsets of groups without members and gives
// their coordinator lease back.
func (c *Coordinator) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		g, code := c.get(ctx, id)
		if code == 0 {
			_, code = call(ctx, g, func(reply chan kmsg.Response) {
				dg.ErrorCode = g.deleteSelf()
				reply <- nil
			})
		}
		if code == -1 {
			return nil
		}
		if code != 0 {
			dg.ErrorCode = code
		}
		if dg.ErrorCode == 0 {
			c.forget(g)
			g.halt()
			if err := c.cfg.Session.Release(ctx, g.own.Resource); err != nil {
				c.log.Warn("release deleted group", "group", id, "err", err)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (g *group) deleteSelf() int16 {
	switch {
	case len(g.members) > 0:
		return kerr.NonEmptyGroup.Code
	case len(g.offsets) == 0:
		return kerr.GroupIDNotFound.Code
	}
	if code := g.persistWith(func(next map[string]map[int32]schema.GroupOffset) { clear(next) }); code != 0 {
		return code
	}
	g.state = Dead
	return 0
}
