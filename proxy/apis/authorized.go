package apis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// The glue between the table and package authrule: each connection's
// authorizer session, the guard of one request, and the row runner that
// decodes a request once for its rule and its handler.
//
// Group, transaction and admin requests are authorized before they are
// begun, as Kafka's broker does: a request refused whole (the group, the
// transactional id or the cluster denied) is answered here with Kafka's
// code (GROUP_, TRANSACTIONAL_ID_ or CLUSTER_AUTHORIZATION_FAILED); a
// request naming several topics, groups or resources of which some are
// denied goes on without them, and their answers (TOPIC_AUTHORIZATION_
// FAILED and so on) are added to the broker's. Which rule applies is the
// API's row (table.go); the request is decoded once, for the rule and the
// handler. Partition-split requests are authorized as they are split
// (topicCheck).

// serveDecoded decodes a request once and runs its row's handler on what
// the principal may do of it: the rule (if the row has one and checks are
// on) sees the request first and may refuse it, strip entries from it or
// patch the answer; the handler gets the same request.
func (d *Dispatcher) serveDecoded(ctx context.Context, conn uint64, h Header, body []byte, a *api) (op, Reply, error) {
	req, err := decodeRequest(h, body, a.kind == kindLocal)
	if err != nil {
		return nil, Reply{}, err
	}
	if a.auth.rule == nil {
		return a.serve(d, ctx, conn, h, req, body)
	}
	g := d.guard(ctx, h.Key)
	if !g.On() {
		return a.serve(d, ctx, conn, h, req, body)
	}
	var v authrule.Verdict
	a.auth.rule(g, req, &v)
	if v.Refuse != 0 {
		return nil, Reply{Body: refuse(req, v.Refuse).AppendTo(nil)}, nil
	}
	if v.Empty {
		p := &patchOp{reply: Reply{Body: answer.ErrorResponse(req, 0).AppendTo(nil)}, req: req, patch: v.Patch}
		reply, err := p.finish(ctx)
		return nil, reply, err
	}
	if v.Stripped {
		body = req.AppendTo(nil) // lives until Finish: the op holds it
	}
	o, reply, err := a.serve(d, ctx, conn, h, req, body)
	if err != nil || len(v.Patch) == 0 {
		return o, reply, err
	}
	p := &patchOp{inner: o, reply: reply, req: req, patch: v.Patch}
	if o == nil {
		reply, err = p.finish(ctx)
		return nil, reply, err
	}
	return p, Reply{}, nil
}

// decodeRequest decodes a request of h's key and version. Requests the
// proxy answers itself are copied out of body (what they keep outlives
// it); forwarded ones are decoded in place, as body lives until Finish.
func decodeRequest(h Header, body []byte, copied bool) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	var err error
	if copied {
		err = req.ReadFrom(body)
	} else {
		err = req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body)
	}
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return req, nil
}

// patchOp adds local answers to a begun request's answer.
type patchOp struct {
	inner op // nil: reply is the answer
	reply Reply
	req   kmsg.Request
	patch []func(kmsg.Response)
}

func (p *patchOp) finish(ctx context.Context) (Reply, error) {
	r := p.reply
	if p.inner != nil {
		var err error
		if r, err = p.inner.finish(ctx); err != nil {
			return r, err
		}
	}
	body := r.Body
	for _, part := range r.Parts {
		body = append(body, part...)
	}
	resp := p.req.ResponseKind()
	resp.SetVersion(p.req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return Reply{}, fmt.Errorf("decode answer to patch: %w", err)
	}
	if r.Release != nil {
		r.Release()
	}
	for _, f := range p.patch {
		f(resp)
	}
	return Reply{Body: resp.AppendTo(nil)}, nil
}

// connSession is a connection's authorizer session for one principal.
type connSession struct {
	p principal.Principal
	s *authz.Session
}

// session is the authorizer session of the connection ctx belongs to: one
// per connection and principal, so its decision cache is the connection's
// (a re-authentication keeps the principal, so it keeps the cache). A
// context without a connection (tests) is User:ANONYMOUS.
func (d *Dispatcher) session(ctx context.Context, a *authz.Authorizer) *authz.Session {
	c := ConnInfoFrom(ctx)
	if c == nil {
		d.anonOnce.Do(func() { d.anon = a.Session(authz.AnonymousUser, "", "") })
		return d.anon
	}
	p := c.Principal()
	if cs := c.authz.Load(); cs != nil && cs.p == p && cs.s.Authorizer() == a {
		return cs.s
	}
	cs := &connSession{p: p, s: a.Session(p.String(), c.Client, c.Listener)}
	c.authz.Store(cs)
	return cs.s
}

// guard is one request's view of the authorizer (authrule.Guard).
func (d *Dispatcher) guard(ctx context.Context, key int16) authrule.Guard {
	var s *authz.Session
	if a := d.cfg.Authorizer; a != nil && a.Enabled() {
		s = d.session(ctx, a)
	}
	return authrule.NewGuard(ctx, key, s, &d.authEnv)
}

// topicCheck authorizes the operation of key's row (perTopic) on the
// topics of one partition-split request.
func (d *Dispatcher) topicCheck(ctx context.Context, key int16) *authrule.TopicCheck {
	return authrule.NewTopicCheck(d.guard(ctx, key), apiTable[key].auth.op)
}

// idNames is the Dispatcher as authrule.Names (Dispatcher.authEnv): a
// pointer conversion, keeping TopicName out of the Dispatcher's methods.
type idNames Dispatcher

func (n *idNames) TopicName(id [16]byte) (string, bool) {
	d := (*Dispatcher)(n)
	return d.ids.name(d.routes, id)
}
