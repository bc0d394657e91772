package apis

import (
	"context"

	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/principal"
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
