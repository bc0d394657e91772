// Routing group requests: to the group's coordinator, one request as is
// (forwardOp) or a batch split per coordinator (groupList).

package apis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/split"
)

// Group requests go to the group's coordinator. A request naming one group
// is forwarded unchanged (forwardOp); a request naming several groups
// (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, OffsetFetch v8+)
// is split per coordinator and merged in the client's order (groupList);
// ListGroups asks every live broker (listGroupsOp, fan.go).

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
