package apis

import (
	"context"
	"fmt"
	"reflect"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// verdict is what a rule decided about one request.
type verdict struct {
	refuse   int16                 // answer the whole request with this code
	stripped bool                  // entries were removed from the request
	empty    bool                  // nothing is left to send: answer locally
	patch    []func(kmsg.Response) // add local answers to the broker's
}

func (v *verdict) add(p func(kmsg.Response)) {
	if p != nil {
		v.patch = append(v.patch, p)
	}
}

// rule decides one request type.
type rule func(g guard, d *Dispatcher, req kmsg.Request, v *verdict)

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
	if !g.on() {
		return a.serve(d, ctx, conn, h, req, body)
	}
	var v verdict
	a.auth.rule(g, d, req, &v)
	if v.refuse != 0 {
		return nil, Reply{Body: refuse(req, v.refuse).AppendTo(nil)}, nil
	}
	if v.empty {
		p := &patchOp{reply: Reply{Body: answer.ErrorResponse(req, 0).AppendTo(nil)}, req: req, patch: v.patch}
		reply, err := p.finish(ctx)
		return nil, reply, err
	}
	if v.stripped {
		body = req.AppendTo(nil) // lives until Finish: the op holds it
	}
	o, reply, err := a.serve(d, ctx, conn, h, req, body)
	if err != nil || len(v.patch) == 0 {
		return o, reply, err
	}
	p := &patchOp{inner: o, reply: reply, req: req, patch: v.patch}
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

// strip removes from *list the entries code denies (non-zero) and returns
// the patch that adds their answers, built by errorResponse, to the
// response's list named field. A list left empty is answered locally.
func strip[Q any](req kmsg.Request, list *[]Q, field string, code func(*Q) int16, v *verdict) {
	var kept []Q
	byCode := map[int16][]Q{}
	var order []int16
	for i := range *list {
		c := code(&(*list)[i])
		if c == 0 {
			kept = append(kept, (*list)[i])
			continue
		}
		if _, ok := byCode[c]; !ok {
			order = append(order, c)
		}
		byCode[c] = append(byCode[c], (*list)[i])
	}
	if len(order) == 0 {
		return
	}
	var answers []kmsg.Response
	for _, c := range order {
		*list = byCode[c]
		answers = append(answers, answer.ErrorResponse(req, c))
	}
	*list = kept
	v.stripped, v.empty = true, len(kept) == 0
	v.add(func(resp kmsg.Response) {
		dst := reflect.ValueOf(resp).Elem().FieldByName(field)
		for _, a := range answers {
			dst.Set(reflect.AppendSlice(dst, reflect.ValueOf(a).Elem().FieldByName(field)))
		}
	})
}

// group and txn codes: 0 when allowed.
func (g guard) groupCode(op kmsg.ACLOperation, group string) int16 {
	if g.allowed(op, kmsg.ACLResourceTypeGroup, group) {
		return 0
	}
	return kerr.GroupAuthorizationFailed.Code
}

func (g guard) txnCode(id string) int16 {
	if g.allowed(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id) {
		return 0
	}
	return kerr.TransactionalIDAuthorizationFailed.Code
}

func (g guard) topicCode(op kmsg.ACLOperation, topic string) int16 {
	if g.allowed(op, kmsg.ACLResourceTypeTopic, topic) {
		return 0
	}
	return kerr.TopicAuthorizationFailed.Code
}

func (g guard) clusterCode(op kmsg.ACLOperation) int16 {
	if g.cluster(op) {
		return 0
	}
	return kerr.ClusterAuthorizationFailed.Code
}

// first returns the first non-zero code.
func first(codes ...func() int16) int16 {
	for _, c := range codes {
		if code := c(); code != 0 {
			return code
		}
	}
	return 0
}
