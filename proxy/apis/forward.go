package apis

import (
	"context"
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

// unroutable is the engine's local answer for an item no live broker can
// take (listGroupsOp: a broker that left; forwardOp: no broker for a retry); an
// internal marker the adapter resolves, never sent to a client.
const unroutable int16 = math.MinInt16
