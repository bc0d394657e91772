package group

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// State is a classic group's state, named as Kafka names it.
type State string

const (
	Empty               State = "Empty"
	PreparingRebalance  State = "PreparingRebalance"
	CompletingRebalance State = "CompletingRebalance"
	Stable              State = "Stable"
	Dead                State = "Dead"
)

type member struct {
	id, instanceID     string
	clientID, host     string
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	session, rebalance time.Duration
	deadline           time.Time // session expiry; not counted while join is set
	join               *kmsg.JoinGroupResponse
	joinReply          chan kmsg.Response
	syncResp           *kmsg.SyncGroupResponse
	syncReply          chan kmsg.Response
	assignment         []byte
}

// summary is what ListGroups reads without entering the group goroutine.
type summary struct {
	state        State
	protocolType string
}

// group is one loaded group. Everything below ops is touched only by the
// group's goroutine (run).
type group struct {
	c    *Coordinator
	id   string
	own  *lease.Ownership
	ops  chan func()
	quit chan struct{} // closed when the goroutine has stopped
	stop chan struct{} // closed to ask it to stop
	sum  chan summary  // latest summary (capacity 1)

	stopOnce sync.Once

	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	pending      map[string]time.Time // member ids handed out, awaiting rejoin (v4+)
	rebalanceEnd time.Time
	offsets      map[string]map[int32]schema.GroupOffset
}

func newGroup(c *Coordinator, id string, own *lease.Ownership, st schema.GroupState) *group {
	g := &group{
		c: c, id: id, own: own,
		ops: make(chan func()), quit: make(chan struct{}), stop: make(chan struct{}),
		sum:     make(chan summary, 1),
		state:   Empty,
		members: make(map[string]*member), pending: make(map[string]time.Time),
		offsets: st.Offsets,
	}
	if g.offsets == nil {
		g.offsets = make(map[string]map[int32]schema.GroupOffset)
	}
	g.sum <- summary{state: Empty}
	return g
}

// run is the group goroutine: it applies operations one at a time and fires
// session and rebalance deadlines from a single timer it owns.
func (g *group) run() {
	defer close(g.quit)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer g.failWaiters()
	for {
		g.resetTimer(timer)
		select {
		case fn := <-g.ops:
			fn()
		case <-timer.C:
			g.expire(g.c.cfg.Now())
		case <-g.stop:
			return
		}
		g.publish()
	}
}

// do runs fn on the group goroutine; false if the group has stopped.
func (g *group) do(fn func()) bool {
	select {
	case g.ops <- fn:
		return true
	case <-g.quit:
		return false
	case <-g.stop:
		return false
	}
}

func (g *group) publish() {
	select {
	case <-g.sum:
	default:
	}
	g.sum <- summary{state: g.state, protocolType: g.protocolType}
}

func (g *group) summary() summary {
	s := <-g.sum
	g.sum <- s
	return s
}

// resetTimer aims the timer at the earliest deadline.
func (g *group) resetTimer(t *time.Timer) {
	next := time.Time{}
	consider := func(d time.Time) {
		if !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	for _, m := range g.members {
		if m.waiting() {
			continue
		}
		consider(m.deadline)
	}
	for _, d := range g.pending {
		consider(d)
	}
	if g.state == PreparingRebalance {
		consider(g.rebalanceEnd)
	}
	wait := time.Hour
	if !next.IsZero() {
		wait = max(next.Sub(g.c.cfg.Now()), time.Millisecond)
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(wait)
}

// expire removes members whose sessions ended and ends an overdue join
// phase.
func (g *group) expire(now time.Time) {
	for id, d := range g.pending {
		if !now.Before(d) {
			delete(g.pending, id)
		}
	}
	removed := false
	for id, m := range g.members {
		if !m.waiting() && !now.Before(m.deadline) {
			g.c.log.Info("group member session expired", "group", g.id, "member", id)
			g.removeMember(m, kerr.UnknownMemberID.Code)
			removed = true
		}
	}
	if g.state == PreparingRebalance && !now.Before(g.rebalanceEnd) {
		for _, m := range g.members {
			if m.joinReply == nil {
				g.c.log.Info("group member did not rejoin in time", "group", g.id, "member", m.id)
				g.removeMember(m, kerr.UnknownMemberID.Code)
			}
		}
		g.completeJoin()
		return
	}
	if removed {
		g.membershipChanged()
	}
}

// membershipChanged starts or finishes a rebalance after members left.
func (g *group) membershipChanged() {
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance()
	case PreparingRebalance:
		g.maybeCompleteJoin()
	}
}

func (g *group) removeMember(m *member, code int16) {
	delete(g.members, m.id)
	if m.joinReply != nil {
		m.join.ErrorCode = code
		m.joinReply <- m.join
		m.joinReply = nil
	}
	if m.syncReply != nil {
		m.syncResp.ErrorCode = code
		m.syncReply <- m.syncResp
		m.syncReply = nil
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// prepareRebalance opens a join phase: every member must rejoin within the
// largest rebalance timeout.
func (g *group) prepareRebalance() {
	if g.state == PreparingRebalance {
		return
	}
	for _, m := range g.members {
		if m.syncReply != nil {
			m.syncResp.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncReply <- m.syncResp
			m.syncReply = nil
		}
	}
	timeout := time.Duration(0)
	for _, m := range g.members {
		timeout = max(timeout, m.rebalance)
	}
	g.state = PreparingRebalance
	g.rebalanceEnd = g.c.cfg.Now().Add(timeout)
	g.maybeCompleteJoin()
}

func (g *group) maybeCompleteJoin() {
	if g.state != PreparingRebalance {
		return
	}
	for _, m := range g.members {
		if m.joinReply == nil {
			return
		}
	}
	g.completeJoin()
}

// completeJoin starts the next generation and answers every waiting join;
// the leader gets the members and their metadata for the chosen protocol.
func (g *group) completeJoin() {
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.protocolType, g.leader = Empty, "", "", ""
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = slices.Sorted(maps.Keys(g.members))[0]
	}
	g.state = CompletingRebalance
	now := g.c.cfg.Now()
	var all []kmsg.JoinGroupResponseMember
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.ProtocolMetadata = m.id, m.metadata(g.protocol)
		if m.instanceID != "" {
			jm.InstanceID = &m.instanceID
		}
		all = append(all, jm)
	}
	for _, m := range g.members {
		m.assignment = nil
		m.deadline = now.Add(m.session)
		r := m.join
		r.Generation, r.LeaderID, r.MemberID = g.generation, g.leader, m.id
		proto, ptype := g.protocol, g.protocolType
		r.Protocol, r.ProtocolType = &proto, &ptype
		if m.id == g.leader {
			r.Members = all
		}
		m.joinReply <- r
		m.join, m.joinReply = nil, nil
	}
}

// selectProtocol picks the protocol every member supports that most
// members prefer (Kafka's vote).
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", -1
	for _, name := range slices.Sorted(maps.Keys(votes)) {
		if votes[name] > n {
			best, n = name, votes[name]
		}
	}
	return best
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !m.supports(name) {
			return false
		}
	}
	return true
}

// waiting reports whether the member is blocked in a JoinGroup or SyncGroup
// (it cannot heartbeat then; the join phase or the leader's session bounds
// the wait instead).
func (m *member) waiting() bool { return m.joinReply != nil || m.syncReply != nil }

func (m *member) supports(name string) bool {
	return slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == name })
}

func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// failWaiters answers every waiting join and sync when the group stops.
func (g *group) failWaiters() {
	for _, m := range g.members {
		if m.joinReply != nil {
			m.join.ErrorCode = kerr.NotCoordinator.Code
			m.joinReply <- m.join
		}
		if m.syncReply != nil {
			m.syncResp.ErrorCode = kerr.NotCoordinator.Code
			m.syncReply <- m.syncResp
		}
	}
}
