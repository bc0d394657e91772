package apis

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

// forwardOp sends a request that one broker answers (a group's
// coordinator, or any broker for admin requests) with its body unchanged,
// and returns the broker's answer unchanged unless it is a definite
// refusal (NOT_COORDINATOR, NOT_CONTROLLER, ...), which is retried on a
// fresh route that avoids the brokers that refused.
type forwardOp struct {
	d        *Dispatcher
	h        Header
	conn     uint64
	req      kmsg.Request // decoded from own, for local error answers
	own      []byte       // the client's body
	target   string       // group, or rendezvous key for any broker
	byGroup  bool
	lostCode int16 // answer when no broker ever took the request
	broker   int32
	avoid    routing.Avoid // brokers that refused so far
	tries    int
	deadline time.Time
	p        Pending
	err      error
}

// forward starts a forwardOp; when no broker can take the request the
// proxy answers it at once with lostCode.
func (d *Dispatcher) forward(ctx context.Context, conn uint64, h Header, req kmsg.Request, own []byte, target string, byGroup bool) (op, Reply, error) {
	o := &forwardOp{
		d: d, h: h, conn: conn, req: req, own: own, target: target, byGroup: byGroup,
		deadline: d.budget(0), lostCode: kerr.RequestTimedOut.Code,
	}
	if byGroup {
		o.lostCode = kerr.CoordinatorNotAvailable.Code
	}
	if !o.send(ctx) {
		return nil, o.local(o.lostCode), nil
	}
	return o, Reply{}, nil
}

func (o *forwardOp) route() (int32, bool) {
	if o.byGroup {
		return o.d.routes.RouteGroupAvoiding(o.target, o.avoid)
	}
	return o.d.routes.AnyBrokerAvoiding(o.target, o.avoid)
}

func (o *forwardOp) send(ctx context.Context) bool {
	b, ok := o.route()
	if !ok {
		return false
	}
	o.broker = b
	o.tries++
	o.p, o.err = o.d.send(ctx, b, o.conn, o.h, o.req, Raw(o.own))
	return true
}

func (o *forwardOp) local(code int16) Reply {
	return Reply{Body: errorResponse(o.req, code).AppendTo(nil)}
}

func (o *forwardOp) finish(ctx context.Context) (Reply, error) {
	name := kmsg.NameForKey(o.h.Key)
	var last []byte // the last refusal, returned if retries run out
	for {
		var resp []byte
		err := o.err
		if err == nil {
			resp, err = o.p.Wait(ctx)
		}
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("%s: %w", name, context.Cause(ctx))
		}
		code, cls := o.classify(resp, err)
		switch cls {
		case retry.Done, retry.Final:
			if err != nil {
				return Reply{Body: resp}, nil
			}
			return Reply{Body: resp, Release: o.p.Release}, nil
		case retry.Ambiguous:
			o.d.log.Debug("ambiguous outcome", "api", name, "broker", o.broker, "err", err)
			return o.local(kerr.RequestTimedOut.Code), nil
		}
		if err == nil {
			last = resp
		}
		delay, ok := o.d.backoff(o.tries, o.deadline)
		if !ok {
			if last != nil {
				return Reply{Body: last}, nil
			}
			return o.local(o.lostCode), nil
		}
		o.d.m.retried(o.h.Key, code, err)
		o.avoid.Add(o.broker)
		if err := o.pause(ctx, delay); err != nil {
			return Reply{}, fmt.Errorf("%s: %w", name, err)
		}
		if !o.send(ctx) {
			if last != nil {
				return Reply{Body: last}, nil
			}
			return o.local(o.lostCode), nil
		}
	}
}

// classify says what one attempt's outcome means; code is the refusal's
// error code (0 for transport errors).
func (o *forwardOp) classify(body []byte, err error) (int16, retry.Class) {
	if err != nil {
		cls := retry.ClassifyErr(err)
		if cls == retry.Ambiguous && readOnly(o.h.Key) {
			cls = retry.Definite
		}
		return 0, cls
	}
	resp := o.req.ResponseKind()
	resp.SetVersion(o.h.Version)
	if derr := resp.ReadFrom(body); derr != nil {
		// A garbled answer; the broker may have processed the request.
		o.d.log.Warn("undecodable broker answer", "api", kmsg.NameForKey(o.h.Key), "broker", o.broker, "err", derr)
		if readOnly(o.h.Key) {
			return 0, retry.Definite
		}
		return 0, retry.Ambiguous
	}
	if code := definiteCode(o.h.Key, resp); code != 0 {
		return code, retry.Definite
	}
	return 0, retry.Done
}

// pause waits before a retry: delay, cut short when routing already names
// a new live owner.
func (o *forwardOp) pause(ctx context.Context, delay time.Duration) error {
	if delay <= 0 || o.moved() {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		changed := o.d.routes.Changed()
		if o.moved() {
			return nil
		}
		select {
		case <-t.C:
			return nil
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (o *forwardOp) moved() bool {
	if !o.byGroup {
		return false
	}
	b, owned := o.d.routes.Coordinator(o.target)
	return owned && !o.avoid.Has(b)
}
