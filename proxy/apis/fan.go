// Routing ListGroups: to every live broker, the lists merged.

package apis

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/split"
)

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
