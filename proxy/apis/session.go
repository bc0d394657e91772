package apis

import (
	"context"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/authz"
	"github.com/kproxy/kproxy/proxy/principal"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// topicCheck authorizes op on the topics of one partition-split request.
func (d *Dispatcher) topicCheck(ctx context.Context, key int16, op kmsg.ACLOperation) *authrule.TopicCheck {
	return authrule.NewTopicCheck(d.guard(ctx, key), op)
}

// idNames is the Dispatcher as authrule.Names (Dispatcher.authEnv): a
// pointer conversion, keeping TopicName out of the Dispatcher's methods.
type idNames Dispatcher

func (n *idNames) TopicName(id [16]byte) (string, bool) {
	d := (*Dispatcher)(n)
	return d.ids.name(d.routes, id)
}
