package group

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client identifies the connection a group request came from.
type Client struct {
	ID   string
	Host string
}

func newMemberID(clientID string) string {
	var r [16]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return clientID + "-" + hex.EncodeToString(r[:])
}

// join runs on the group goroutine; the answer goes to reply, possibly only
// when the join phase ends.
func (g *group) join(req *kmsg.JoinGroupRequest, cl Client, reply chan kmsg.Response) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) {
		resp.ErrorCode = code
		reply <- resp
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	if code := g.checkJoin(req, session); code != 0 {
		fail(code)
		return
	}
	now := g.c.cfg.Now()
	id := req.MemberID
	m := g.members[id]
	switch {
	case id == "" && req.Version >= 4:
		// KIP-394: hand out an id first; the member rejoins with it.
		id = newMemberID(cl.ID)
		g.pending[id] = now.Add(session)
		resp.MemberID = id
		fail(kerr.MemberIDRequired.Code)
		return
	case id == "":
		id = newMemberID(cl.ID)
	case m == nil:
		if _, ok := g.pending[id]; !ok {
			fail(kerr.UnknownMemberID.Code)
			return
		}
	}
	delete(g.pending, id)
	if m == nil {
		m = &member{id: id}
		g.members[id] = m
		if len(g.members) == 1 {
			g.protocolType = req.ProtocolType
		}
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	m.clientID, m.host, m.protocolType = cl.ID, cl.Host, req.ProtocolType
	m.protocols, m.session, m.rebalance = req.Protocols, session, rebalance
	if req.InstanceID != nil {
		m.instanceID = *req.InstanceID
	}
	m.deadline = now.Add(session)
	if m.joinReply != nil { // a repeated join supersedes the waiting one
		m.join.ErrorCode = kerr.RebalanceInProgress.Code
		m.joinReply <- m.join
	}
	m.join, m.joinReply = resp, reply
	if (g.state == Stable || g.state == CompletingRebalance) && !changed && m.id != g.leader {
		g.answerCurrent(m) // nothing changed: the current generation stands
		return
	}
	g.prepareRebalance()
	g.maybeCompleteJoin()
}

// checkJoin validates a join against the group's protocols.
func (g *group) checkJoin(req *kmsg.JoinGroupRequest, session time.Duration) int16 {
	switch {
	case session < g.c.cfg.MinSessionTimeout || session > g.c.cfg.MaxSessionTimeout:
		return kerr.InvalidSessionTimeout.Code
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return kerr.InconsistentGroupProtocol.Code
	case len(g.members) > 0 && (req.ProtocolType != g.protocolType || !g.anyCommon(req.Protocols)):
		return kerr.InconsistentGroupProtocol.Code
	}
	return 0
}

// answerCurrent answers m's join with the current generation.
func (g *group) answerCurrent(m *member) {
	r := m.join
	r.Generation, r.LeaderID, r.MemberID = g.generation, g.leader, m.id
	proto, ptype := g.protocol, g.protocolType
	r.Protocol, r.ProtocolType = &proto, &ptype
	m.joinReply <- r
	m.join, m.joinReply = nil, nil
}

func (g *group) anyCommon(ps []kmsg.JoinGroupRequestProtocol) bool {
	return slices.ContainsFunc(ps, func(p kmsg.JoinGroupRequestProtocol) bool { return g.allSupport(p.Name) })
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && string(x.Metadata) == string(y.Metadata)
	})
}

// checkMember applies Kafka's member and generation checks.
func (g *group) checkMember(memberID string, generation int32) (*member, int16) {
	m := g.members[memberID]
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID.Code
	case generation != g.generation:
		return m, kerr.IllegalGeneration.Code
	}
	return m, 0
}

func (g *group) sync(req *kmsg.SyncGroupRequest, reply chan kmsg.Response) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	m, code := g.checkMember(req.MemberID, req.Generation)
	switch {
	case code != 0:
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		code = kerr.InconsistentGroupProtocol.Code
	case g.state == PreparingRebalance:
		code = kerr.RebalanceInProgress.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		reply <- resp
		return
	}
	m.deadline = g.c.cfg.Now().Add(m.session)
	proto, ptype := g.protocol, g.protocolType
	resp.Protocol, resp.ProtocolType = &proto, &ptype
	if g.state == Stable {
		resp.MemberAssignment = m.assignment
		reply <- resp
		return
	}
	// CompletingRebalance: wait for the leader's assignment.
	if m.syncReply != nil {
		m.syncResp.ErrorCode = kerr.RebalanceInProgress.Code
		m.syncReply <- m.syncResp
	}
	m.syncResp, m.syncReply = resp, reply
	if m.id != g.leader {
		return
	}
	for _, a := range req.GroupAssignment {
		if om := g.members[a.MemberID]; om != nil {
			om.assignment = a.MemberAssignment
		}
	}
	g.state = Stable
	for _, om := range g.members {
		if om.syncReply != nil {
			om.syncResp.MemberAssignment = om.assignment
			om.syncReply <- om.syncResp
			om.syncResp, om.syncReply = nil, nil
		}
	}
}

func (g *group) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	m, code := g.checkMember(req.MemberID, req.Generation)
	if code != 0 {
		return code
	}
	m.deadline = g.c.cfg.Now().Add(m.session)
	if g.state == PreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

func (g *group) leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		ids = req.Members
	}
	left := false
	for _, lm := range ids {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		m := g.members[lm.MemberID]
		if m == nil && lm.MemberID == "" && lm.InstanceID != nil {
			m = g.byInstance(*lm.InstanceID)
		}
		if m == nil {
			rm.ErrorCode = kerr.UnknownMemberID.Code
		} else {
			g.removeMember(m, kerr.UnknownMemberID.Code)
			left = true
		}
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	if left {
		g.membershipChanged()
	}
	return resp
}

func (g *group) byInstance(instanceID string) *member {
	for _, m := range g.members {
		if m.instanceID == instanceID {
			return m
		}
	}
	return nil
}
