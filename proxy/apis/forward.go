package apis

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// forwardOp sends a request that one broker answers (a group's
// coordinator, or any broker for admin requests) with its body unchanged,
// and returns the broker's answer unchanged unless it is a definite
// refusal (NOT_COORDINATOR, NOT_CONTROLLER, ...), which is retried on a
// fresh route that avoids the brokers that refused. It is the split
// engine's adapter for a request of one item: the engine routes, retries
// within the budget and passes a clean answer through as it came.
type forwardOp struct {
	s      splitter
	req    kmsg.Request // decoded from s.own, for local error answers
	answer []byte       // the last broker answer, or a local one
}

// forward starts a forwardOp to target (a group when byGroup, else the
// rendezvous key of any broker); when no broker can take the request the
// answer carries the coordinator-not-available (group) or timed-out code.
func (d *Dispatcher) forward(ctx context.Context, conn uint64, h Header, req kmsg.Request, own []byte, target string, byGroupTarget bool) (op, Reply, error) {
	o := &forwardOp{req: req}
	s := &o.s
	s.init(d, o, h, conn)
	s.own, s.deadline, s.hold, s.whole = own, d.budget(0), holdOf(req), true
	s.routeBy, s.lostCode = byAnyBroker, kerr.RequestTimedOut.Code
	if byGroupTarget {
		s.routeBy, s.lostCode = byGroup, kerr.CoordinatorNotAvailable.Code
	}
	s.noRoute = s.lostCode
	s.add(target, [16]byte{}, 0, 0, 0)
	s.dispatch(ctx, own)
	return o, Reply{}, nil
}

func (o *forwardOp) finish(ctx context.Context) (Reply, error) { return o.s.finish(ctx) }

// encode re-sends the client's body (retries; the first attempt sends it
// as it is).
func (o *forwardOp) encode(dst []byte, _ []int32, _ int) []byte { return append(dst, o.s.own...) }

// absorb keeps the answer and reports its first definite refusal, if any.
// A garbled answer is an error: the broker may have processed the request.
func (o *forwardOp) absorb(body []byte, _ int) (bool, error) {
	resp := o.req.ResponseKind()
	resp.SetVersion(o.s.version)
	if err := resp.ReadFrom(body); err != nil {
		return false, err
	}
	o.answer = body
	o.s.answered(0, definiteCode(o.s.key, resp))
	return true, nil
}

func (o *forwardOp) fail(_ int32, code int16) { o.answer = errorResponse(o.req, code).AppendTo(nil) }

func (o *forwardOp) merge(dst []byte) []byte { return append(dst, o.answer...) }
