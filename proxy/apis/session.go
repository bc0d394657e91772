package apis

import (
	"context"

	"github.com/kproxy/kproxy/proxy/authz"
)

// session is the authorizer session of the connection ctx belongs to.
// Until connections carry a principal, every request is User:ANONYMOUS.
func (d *Dispatcher) session(_ context.Context, a *authz.Authorizer) *authz.Session {
	d.anonOnce.Do(func() { d.anon = a.Session(authz.AnonymousUser, "", "") })
	return d.anon
}
