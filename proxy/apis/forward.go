package apis

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/apis/split"
)

// forwardOp sends a request that one broker answers (a group's
// coordinator, or any broker for admin requests) with its body unchanged,
// and returns the broker's answer unchanged unless it is a definite
// refusal (NOT_COORDINATOR, NOT_CONTROLLER, ...), which is retried on a
// fresh route that avoids the brokers that refused. It is the split
// engine's adapter for a request of one item: the engine routes, retries
// within the budget and passes a clean answer through as it came.
type forwardOp struct {
	s      split.Engine
	req    kmsg.Request // decoded from s.own, for local error answers
	answer []byte       // the last broker answer, or a local one
	broker bool         // answer is a broker's
	lost   int16        // local answer when no broker ever answered
}

// forward starts a forwardOp to target (a group when byGroup, else the
// rendezvous key of any broker); when no broker can take the request the
// answer carries the coordinator-not-available (group) or timed-out code.
func (d *Dispatcher) forward(ctx context.Context, conn uint64, h Header, req kmsg.Request, own []byte, target string, byGroupTarget bool) (op, Reply, error) {
	o := &forwardOp{req: req, lost: kerr.RequestTimedOut.Code}
	r := split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: own, Deadline: d.budget(0),
		Hold: holdOf(req), Whole: true, RouteBy: split.ByAnyBroker, LostCode: kerr.RequestTimedOut.Code,
	}
	if byGroupTarget {
		r.RouteBy, r.LostCode, o.lost = split.ByGroup, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorNotAvailable.Code
	}
	r.NoRoute = unroutable
	s := &o.s
	s.Init(&d.eng, o, r)
	s.Add(target, [16]byte{}, 0, 0, 0)
	s.Dispatch(ctx, own)
	return o, Reply{}, nil
}

func (o *forwardOp) finish(ctx context.Context) (Reply, error) { return answerReply(o.s.Finish(ctx)) }

// encode re-sends the client's body (retries; the first attempt sends it
// as it is), or the decoded request at a bridged broker's version.
func (o *forwardOp) Encode(dst []byte, _ []int32, _ int) []byte {
	if v := o.s.SubVersion(); v != o.s.Version() {
		return appendAt(o.req, v, dst)
	}
	return append(dst, o.s.Own()...)
}

// Carries is split.Bridger (bridge.go).
func (o *forwardOp) Carries(to int16) bool { return carries(o.req, to) }

// absorb keeps the answer and reports its first definite refusal, if any.
// A garbled answer is an error: the broker may have processed the request.
func (o *forwardOp) Absorb(body []byte, si int) (bool, error) {
	resp := o.req.ResponseKind()
	resp.SetVersion(o.s.VersionOf(si))
	if err := resp.ReadFrom(body); err != nil {
		return false, err
	}
	if v := o.s.Version(); resp.GetVersion() != v && bridgeAgain(resp, o.req) {
		o.s.Again(0)
		return false, nil
	}
	o.answer, o.broker = body, true
	if v := o.s.Version(); resp.GetVersion() != v {
		bridgeAnswer(resp, o.req)
		resp.SetVersion(v)
		o.answer = resp.AppendTo(nil)
	}
	o.s.Answered(0, answer.DefiniteCode(repeatable(o.s.Key()), resp))
	return true, nil
}

// Fail answers locally; when no broker is left for a retry, the last
// broker's refusal is the answer, if there was one.
func (o *forwardOp) Fail(_ int32, code int16) {
	if code == unroutable {
		if o.broker {
			return
		}
		code = o.lost
	}
	o.answer, o.broker = answer.ErrorResponse(o.req, code).AppendTo(nil), false
}

func (o *forwardOp) Merge(dst []byte) []byte { return append(dst, o.answer...) }

// Admin and transaction requests go to any live broker, unchanged: brokers
// share all metadata through etcd, so any of them can answer. The broker is
// picked by rendezvous on a key from the request (the transactional id, or
// the first topic or resource), so that related requests meet at the same
// broker; a definite refusal (NOT_CONTROLLER, a request never sent) is
// retried on another broker.
func (d *Dispatcher) beginAdmin(ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error) {
	return d.forward(ctx, conn, h, req, body, adminKey(req), false)
}

// adminKey is the rendezvous key of an admin or transaction request: its
// row's routing key, or none (any broker).
func adminKey(req kmsg.Request) string {
	if route := apiTable[req.Key()].route; route != nil {
		return route(req)
	}
	return ""
}

// Group requests go to the group's coordinator. A request naming one group
// is forwarded unchanged (forwardOp); a request naming several groups
// (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, OffsetFetch v8+)
// is split per coordinator and merged in the client's order (groupList);
// ListGroups asks every live broker (fanOp, below).

func (d *Dispatcher) beginGroup(ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error) {
	var gl interface {
		split.Adapter
		op
		sp() *split.Engine
		addItems()
	}
	switch r := req.(type) {
	case *kmsg.DescribeGroupsRequest:
		gl = newGroupList(r, &r.Groups, strName,
			func(x kmsg.Response) *[]kmsg.DescribeGroupsResponseGroup {
				return &x.(*kmsg.DescribeGroupsResponse).Groups
			},
			func(g *kmsg.DescribeGroupsResponseGroup) (string, int16) { return g.Group, g.ErrorCode },
			func(name string, code int16) kmsg.DescribeGroupsResponseGroup {
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.ErrorCode = name, code
				return g
			})
	case *kmsg.DeleteGroupsRequest:
		gl = newGroupList(r, &r.Groups, strName,
			func(x kmsg.Response) *[]kmsg.DeleteGroupsResponseGroup { return &x.(*kmsg.DeleteGroupsResponse).Groups },
			func(g *kmsg.DeleteGroupsResponseGroup) (string, int16) { return g.Group, g.ErrorCode },
			func(name string, code int16) kmsg.DeleteGroupsResponseGroup {
				g := kmsg.NewDeleteGroupsResponseGroup()
				g.Group, g.ErrorCode = name, code
				return g
			})
	case *kmsg.ConsumerGroupDescribeRequest:
		gl = newGroupList(r, &r.Groups, strName,
			func(x kmsg.Response) *[]kmsg.ConsumerGroupDescribeResponseGroup {
				return &x.(*kmsg.ConsumerGroupDescribeResponse).Groups
			},
			func(g *kmsg.ConsumerGroupDescribeResponseGroup) (string, int16) { return g.Group, g.ErrorCode },
			func(name string, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
				g := kmsg.NewConsumerGroupDescribeResponseGroup()
				g.Group, g.ErrorCode = name, code
				return g
			})
	case *kmsg.OffsetFetchRequest:
		if h.Version < 8 {
			return d.forward(ctx, conn, h, req, body, apiTable[h.Key].route(req), true)
		}
		gl = newGroupList(r, &r.Groups, func(g *kmsg.OffsetFetchRequestGroup) string { return g.Group },
			func(x kmsg.Response) *[]kmsg.OffsetFetchResponseGroup { return &x.(*kmsg.OffsetFetchResponse).Groups },
			func(g *kmsg.OffsetFetchResponseGroup) (string, int16) { return g.Group, g.ErrorCode },
			func(name string, code int16) kmsg.OffsetFetchResponseGroup {
				g := kmsg.NewOffsetFetchResponseGroup()
				g.Group, g.ErrorCode = name, code
				return g
			})
	default:
		route := apiTable[h.Key].route
		if route == nil {
			return nil, Reply{}, fmt.Errorf("no group in %T", req)
		}
		return d.forward(ctx, conn, h, req, body, route(req), true)
	}
	gl.sp().Init(&d.eng, gl, split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: body, Deadline: d.budget(0),
		Hold: holdOf(req), RouteBy: split.ByGroup,
		LostCode: kerr.CoordinatorNotAvailable.Code, NoRoute: kerr.CoordinatorNotAvailable.Code,
	})
	gl.addItems()
	gl.sp().Dispatch(ctx, body)
	return gl, Reply{}, nil
}

func strName(s *string) string { return *s }

// groupList adapts a request listing groups (request elements Q, response
// elements R) to the split engine: items are groups, routed by coordinator.
type groupList[Q, R any] struct {
	s       split.Engine
	req     kmsg.Request
	groups  *[]Q // the request's list; swapped for a subset while encoding
	all     []Q
	name    func(*Q) string
	list    func(kmsg.Response) *[]R
	answer  func(*R) (string, int16)
	failed  func(string, int16) R
	answers []R
	scratch []Q
	thr     int32
}

func newGroupList[Q, R any](req kmsg.Request, groups *[]Q, name func(*Q) string, list func(kmsg.Response) *[]R,
	answer func(*R) (string, int16), failed func(string, int16) R,
) *groupList[Q, R] {
	return &groupList[Q, R]{req: req, groups: groups, all: *groups, name: name, list: list, answer: answer, failed: failed}
}

func (g *groupList[Q, R]) sp() *split.Engine { return &g.s }

func (g *groupList[Q, R]) addItems() {
	g.answers = make([]R, len(g.all))
	g.s.Reserve(len(g.all))
	for i := range g.all {
		g.s.Add(g.name(&g.all[i]), [16]byte{}, 0, int32(i), 0)
	}
}

func (g *groupList[Q, R]) finish(ctx context.Context) (Reply, error) {
	return answerReply(g.s.Finish(ctx))
}

func (g *groupList[Q, R]) Encode(dst []byte, idx []int32, _ int) []byte {
	sub := g.scratch[:0]
	for _, i := range idx {
		sub = append(sub, g.all[g.s.KeyOf(i).TI])
	}
	g.scratch = sub
	*g.groups = sub
	dst = appendAt(g.req, g.s.SubVersion(), dst)
	*g.groups = g.all
	return dst
}

// Carries is split.Bridger (bridge.go).
func (g *groupList[Q, R]) Carries(to int16) bool { return carries(g.req, to) }

func (g *groupList[Q, R]) Absorb(body []byte, si int) (bool, error) {
	resp := g.req.ResponseKind()
	resp.SetVersion(g.s.VersionOf(si))
	if err := resp.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body); err != nil {
		return false, err
	}
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		thr, _ := t.Throttle()
		g.thr = max(g.thr, thr)
	}
	m := g.s.Matcher(si)
	list := *g.list(resp)
	for j := range list {
		name, code := g.answer(&list[j])
		if i := m.Find(name, [16]byte{}, false, 0); i >= 0 {
			g.answers[i] = list[j]
			g.s.Answered(i, code)
		}
	}
	return true, nil
}

func (g *groupList[Q, R]) Fail(i int32, code int16) {
	g.answers[i] = g.failed(g.s.KeyOf(i).Topic, code)
}

func (g *groupList[Q, R]) Merge(dst []byte) []byte {
	resp := g.req.ResponseKind()
	*g.list(resp) = g.answers
	if t, ok := resp.(kmsg.SetThrottleResponse); ok {
		t.SetThrottle(g.thr)
	}
	return resp.AppendTo(dst)
}

// listGroupsOp asks every live broker for the groups it coordinates and
// merges the lists (each group once). It is the split engine's adapter with
// one item per broker, routed to that broker only. A broker that is gone
// before it answered is skipped: its groups have moved to live brokers,
// which list them. Other failures are retried on the same broker within
// the budget; if one still fails, the merged answer carries its error so
// the client retries rather than trusting a partial list.
type listGroupsOp struct {
	s       split.Engine
	answers []*kmsg.ListGroupsResponse // per broker; nil: skipped
	codes   []int16                    // per broker: a local failure
}

// unroutable is the engine's local answer for an item no live broker can
// take (fanOp: a broker that left; forwardOp: no broker for a retry); an
// internal marker the adapter resolves, never sent to a client.
const unroutable int16 = math.MinInt16

// beginListGroups forwards the request as the client encoded it; it was
// decoded (serveDecoded) only to be checked and authorized.
func (d *Dispatcher) beginListGroups(ctx context.Context, conn uint64, h Header, _ kmsg.Request, body []byte) (op, Reply, error) {
	o := &listGroupsOp{}
	s := &o.s
	s.Init(&d.eng, o, split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: body, Deadline: d.budget(0),
		RouteBy: split.ByBroker, LostCode: kerr.CoordinatorNotAvailable.Code, NoRoute: unroutable,
	})
	brokers := d.routes.Brokers()
	o.answers, o.codes = make([]*kmsg.ListGroupsResponse, len(brokers)), make([]int16, len(brokers))
	s.Reserve(len(brokers))
	for i, b := range brokers {
		s.Add("", [16]byte{}, b.ID, int32(i), 0)
	}
	s.Dispatch(ctx, body)
	return o, Reply{}, nil
}

func (o *listGroupsOp) finish(ctx context.Context) (Reply, error) {
	return answerReply(o.s.Finish(ctx))
}

func (o *listGroupsOp) Encode(dst []byte, _ []int32, _ int) []byte { return append(dst, o.s.Own()...) }

func (o *listGroupsOp) Absorb(body []byte, si int) (bool, error) {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = o.s.Version()
	if err := resp.ReadFrom(body); err != nil {
		return false, err
	}
	for _, i := range o.s.ItemsOf(si) { // one: the broker's
		o.answers[i], o.codes[i] = resp, 0
		o.s.Answered(i, resp.ErrorCode)
	}
	return true, nil
}

// fail records a broker's local failure; a broker gone before it answered
// is skipped, one gone after a refusal keeps its refusal.
func (o *listGroupsOp) Fail(i int32, code int16) {
	if code == unroutable {
		if o.answers[i] == nil {
			o.codes[i] = 0
		}
		return
	}
	o.answers[i], o.codes[i] = nil, code
}

func (o *listGroupsOp) Merge(dst []byte) []byte {
	merged := kmsg.NewPtrListGroupsResponse()
	merged.Version = o.s.Version()
	if len(o.answers) == 0 {
		merged.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	seen := map[string]bool{}
	for i, resp := range o.answers {
		if resp == nil {
			merged.ErrorCode = cmpOr(merged.ErrorCode, o.codes[i])
			continue
		}
		merged.ErrorCode = cmpOr(merged.ErrorCode, resp.ErrorCode)
		merged.ThrottleMillis = max(merged.ThrottleMillis, resp.ThrottleMillis)
		for _, g := range resp.Groups {
			if !seen[g.Group] {
				seen[g.Group] = true
				merged.Groups = append(merged.Groups, g)
			}
		}
	}
	return merged.AppendTo(dst)
}

func cmpOr(a, b int16) int16 {
	if a != 0 {
		return a
	}
	return b
}
