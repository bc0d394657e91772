package apis

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// listGroupsOp asks every live broker for the groups it coordinates and
// merges the lists (each group once). A broker that is gone (the request
// was never sent) is skipped: its groups have moved to live brokers, which
// list them. Other failures are retried on the same broker within the
// budget; if one still fails, the merged answer carries its error so the
// client retries rather than trusting a partial list.
type listGroupsOp struct {
	d        *Dispatcher
	h        Header
	conn     uint64
	own      []byte // the client's body
	deadline time.Time
	asks     []fanAsk
}

type fanAsk struct {
	broker int32
	tries  int
	p      Pending
	err    error
}

func (d *Dispatcher) beginListGroups(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = h.Version
	if err := req.ReadFrom(body); err != nil {
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	o := &listGroupsOp{d: d, h: h, conn: conn, own: body, deadline: d.budget(0)}
	brokers := d.routes.Brokers()
	o.asks = make([]fanAsk, len(brokers))
	for i, b := range brokers {
		o.asks[i].broker = b.ID
		o.send(ctx, &o.asks[i])
	}
	d.m.split(h.Key, len(brokers))
	return o, Reply{}, nil
}

func (o *listGroupsOp) send(ctx context.Context, a *fanAsk) {
	a.tries++
	a.p, a.err = o.d.send(ctx, a.broker, o.conn, o.h, nil, Raw(o.own))
}

func (o *listGroupsOp) finish(ctx context.Context) (Reply, error) {
	merged := kmsg.NewPtrListGroupsResponse()
	merged.Version = o.h.Version
	if len(o.asks) == 0 {
		merged.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	seen := map[string]bool{}
	for i := range o.asks {
		resp, err := o.collect(ctx, &o.asks[i])
		if ctx.Err() != nil {
			return Reply{}, fmt.Errorf("ListGroups: %w", context.Cause(ctx))
		}
		switch {
		case err != nil && isNotSent(err) && !o.live(o.asks[i].broker):
			continue
		case err != nil:
			o.d.log.Debug("ListGroups broker failed", "broker", o.asks[i].broker, "err", err)
			merged.ErrorCode = cmpOr(merged.ErrorCode, kerr.CoordinatorNotAvailable.Code)
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
	return Reply{Body: merged.AppendTo(nil)}, nil
}

func cmpOr(a, b int16) int16 {
	if a != 0 {
		return a
	}
	return b
}

// collect waits for one broker's answer, retrying it there while it is a
// definite failure, the broker is live and the budget lasts.
func (o *listGroupsOp) collect(ctx context.Context, a *fanAsk) (*kmsg.ListGroupsResponse, error) {
	for {
		resp, code, err := o.attempt(ctx, a)
		if err == nil && retry.Classify(o.h.Key, code) != retry.Definite {
			return resp, nil
		}
		delay, ok := o.d.backoff(a.tries, o.deadline)
		if !ok || !o.live(a.broker) || ctx.Err() != nil {
			return resp, err
		}
		o.d.m.retried(o.h.Key, code, err)
		if err := retry.Wait(ctx, delay); err != nil {
			return nil, err
		}
		o.send(ctx, a)
	}
}

func (o *listGroupsOp) attempt(ctx context.Context, a *fanAsk) (*kmsg.ListGroupsResponse, int16, error) {
	if a.err != nil {
		return nil, 0, a.err
	}
	raw, err := a.p.Wait(ctx)
	if err != nil {
		return nil, 0, err
	}
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = o.h.Version
	if err := resp.ReadFrom(raw); err != nil {
		return nil, 0, fmt.Errorf("decode ListGroups answer from broker %d: %w", a.broker, err)
	}
	return resp, resp.ErrorCode, nil
}

func (o *listGroupsOp) live(id int32) bool {
	_, ok := o.d.routes.Broker(id)
	return ok
}
