// Package authrule decides what a principal may do of one Kafka request, as
// Kafka's broker does: the rules of the APIs authorized before they are
// begun (rules.go: refuse the request whole, strip denied entries and add
// their answers, or filter the answer), the per-topic check of partition-
// split requests (TopicCheck) and Metadata's (metadata.go). It promises
// Kafka's codes and Kafka's order of checks; its limit: it only decides
// (Verdict) and never sends, and it resolves topic ids only through the
// Names it is given. Each rule is named by its API's row in proxy/apis.
package authrule

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

// Guard is one request's view of the authorizer: the connection's session
// (nil: allow everything), the recorder that counts and audits each
// decision, and the names of topic ids (rules of requests naming topics by
// id authorize them by name).
type Guard struct {
	s   *authz.Session
	env *Env
	key int16
	ctx context.Context
}

// Env is what the guards of one dispatcher share: one pointer in each
// guard, so that a TopicCheck stays one small allocation per request.
type Env struct {
	Recorder *authz.Recorder // counts and audits decisions (nil: not recorded)
	Names    Names           // nil: no topic id resolves
}

// Names resolves topic ids to names; an unknown id is the broker's to
// answer, so the rule lets it through.
type Names interface {
	TopicName(id [16]byte) (string, bool)
}

// NewGuard returns the guard of one request of API key. s nil (no
// authorizer, or mode allow-all) allows everything without any work.
func NewGuard(ctx context.Context, key int16, s *authz.Session, env *Env) Guard {
	return Guard{s: s, env: env, key: key, ctx: ctx}
}

func (g Guard) topicName(id [16]byte) (string, bool) {
	if g.env == nil || g.env.Names == nil {
		return "", false
	}
	return g.env.Names.TopicName(id)
}

// On reports whether checks are made at all.
func (g Guard) On() bool { return g.s != nil }

// Allowed decides op on a resource, and reports the decision.
func (g Guard) Allowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.s == nil {
		return true
	}
	d, _ := g.s.Authorize(op, rt, name)
	if g.env != nil {
		g.env.Recorder.Record(g.ctx, g.key, g.s, op, rt, name, d)
	}
	return d.Permits()
}

// Cluster decides op on the cluster resource.
func (g Guard) Cluster(op kmsg.ACLOperation) bool {
	return g.Allowed(op, kmsg.ACLResourceTypeCluster, authz.ClusterName)
}

// Quietly decides op on a resource without reporting it: for a check that
// only widens what is allowed, whose denial is no refusal (Kafka does not
// log those either).
func (g Guard) Quietly(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.s == nil {
		return true
	}
	d, _ := g.s.Authorize(op, rt, name)
	return d.Permits()
}

// AnyTopicWrite reports whether the principal may write some topic.
func (g Guard) AnyTopicWrite() bool {
	if g.s == nil {
		return true
	}
	return g.s.AnyAllowed(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
}

// Ops returns Kafka's authorized-operations bits for a resource (without
// recording: they describe, they do not decide).
func (g Guard) Ops(rt kmsg.ACLResourceType, name string, list []kmsg.ACLOperation) int32 {
	if g.s == nil {
		return authz.OperationsBits(list)
	}
	return g.s.Operations(rt, name, list)
}

// TopicCheck is how the partitions of one request are authorized as they
// are added to the split engine: op on each topic, a denied topic's
// partitions answered with code (TOPIC_AUTHORIZATION_FAILED) while the
// others go on. all, when set, answers every partition with it (a request
// refused whole: a follower fetch without ClusterAction, a transactional
// produce without Write on its transactional id). Consecutive partitions
// of one topic share one decision.
type TopicCheck struct {
	g    Guard
	op   kmsg.ACLOperation
	all  int16
	last string
	code int16 // the decision for last
	seen bool
}

// NewTopicCheck checks op on each topic with g.
func NewTopicCheck(g Guard, op kmsg.ACLOperation) *TopicCheck {
	return &TopicCheck{g: g, op: op}
}

// Guard is the check's guard.
func (c *TopicCheck) Guard() Guard { return c.g }

// RefuseAll answers every partition with code (a request refused whole).
func (c *TopicCheck) RefuseAll(code int16) { c.all = code }

// Denied returns the code to answer a partition of topic with, or 0.
func (c *TopicCheck) Denied(topic string) int16 {
	if c == nil || !c.g.On() {
		return 0
	}
	if c.all != 0 {
		return c.all
	}
	if !c.seen || topic != c.last {
		c.last, c.seen, c.code = topic, true, 0
		if !c.g.Allowed(c.op, kmsg.ACLResourceTypeTopic, topic) {
			c.code = kerr.TopicAuthorizationFailed.Code
		}
	}
	return c.code
}
