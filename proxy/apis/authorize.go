package apis

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// The authorizer is asked per resource as a request is decoded and split:
// a denied partition, group or resource is answered locally with Kafka's
// error code while the rest of the request goes on (authz.Recorder counts
// and audits each decision). With no authorizer configured, or in mode
// allow-all, every check passes without any work.

// guard is one request's view of the authorizer.
type guard struct {
	d   *Dispatcher
	s   *authz.Session // nil: allow everything
	key int16
	ctx context.Context
}

func (d *Dispatcher) guard(ctx context.Context, key int16) guard {
	g := guard{d: d, key: key, ctx: ctx}
	if a := d.cfg.Authorizer; a != nil && a.Enabled() {
		g.s = d.session(ctx, a)
	}
	return g
}

// on reports whether checks are made at all.
func (g guard) on() bool { return g.s != nil }

// allowed decides op on a resource, and reports the decision.
func (g guard) allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.s == nil {
		return true
	}
	d, _ := g.s.Authorize(op, rt, name)
	g.d.cfg.AuthzRecorder.Record(g.ctx, g.key, g.s, op, rt, name, d)
	return d.Permits()
}

// cluster decides op on the cluster resource.
func (g guard) cluster(op kmsg.ACLOperation) bool {
	return g.allowed(op, kmsg.ACLResourceTypeCluster, authz.ClusterName)
}

// quietly decides op on a resource without reporting it: for a check that
// only widens what is allowed, whose denial is no refusal (Kafka does not
// log those either).
func (g guard) quietly(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.s == nil {
		return true
	}
	d, _ := g.s.Authorize(op, rt, name)
	return d.Permits()
}

// anyTopicWrite reports whether the principal may write some topic.
func (g guard) anyTopicWrite() bool {
	if g.s == nil {
		return true
	}
	return g.s.AnyAllowed(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
}

// ops returns Kafka's authorized-operations bits for a resource (without
// recording: they describe, they do not decide).
func (g guard) ops(rt kmsg.ACLResourceType, name string, list []kmsg.ACLOperation) int32 {
	if g.s == nil {
		return authz.OperationsBits(list)
	}
	return g.s.Operations(rt, name, list)
}

// topicCheck is how the partitions of one request are authorized as they
// are added to the split engine: op on each topic, a denied topic's
// partitions answered with code (TOPIC_AUTHORIZATION_FAILED) while the
// others go on. all, when set, answers every partition with it (a request
// refused whole: a follower fetch without ClusterAction, a transactional
// produce without Write on its transactional id). Consecutive partitions
// of one topic share one decision.
type topicCheck struct {
	g    guard
	op   kmsg.ACLOperation
	all  int16
	last string
	code int16 // the decision for last
	seen bool
}

func (d *Dispatcher) topicCheck(ctx context.Context, key int16, op kmsg.ACLOperation) *topicCheck {
	return &topicCheck{g: d.guard(ctx, key), op: op}
}

// denied returns the code to answer a partition of topic with, or 0.
func (c *topicCheck) denied(topic string) int16 {
	if c == nil || !c.g.on() {
		return 0
	}
	if c.all != 0 {
		return c.all
	}
	if !c.seen || topic != c.last {
		c.last, c.seen, c.code = topic, true, 0
		if !c.g.allowed(c.op, kmsg.ACLResourceTypeTopic, topic) {
			c.code = kerr.TopicAuthorizationFailed.Code
		}
	}
	return c.code
}
