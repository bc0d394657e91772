package apis

// What the dispatcher knows of a request's client connection (ConnInfo),
// carried in the context, and the address advertised to it.

import (
	"context"
	"sync/atomic"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

// ConnInfo is what the dispatcher knows of the client connection a request
// came on: the listener (whose advertised address Metadata, FindCoordinator
// and DescribeCluster answer with) and the connection's principal. The
// connection stores it once in the context it passes to Begin and Finish, so
// reading it costs no allocation per request.
type ConnInfo struct {
	Listener string // listener name, e.g. "SASL_SSL"
	Host     string // the listener's advertised host
	Port     int32  // the listener's advertised port
	Client   string // the client's IP address (ACL host matching)

	principal atomic.Pointer[principal.Principal]
	authz     atomic.Pointer[connSession] // see Dispatcher.session
}

// NewConnInfo returns the connection state for a client on a listener,
// starting as User:ANONYMOUS.
func NewConnInfo(listener, host string, port int32) *ConnInfo {
	c := &ConnInfo{Listener: listener, Host: host, Port: port}
	p := principal.Anonymous
	c.principal.Store(&p)
	return c
}

// Principal is who the connection authenticated as (User:ANONYMOUS until it
// does, and on listeners without authentication).
func (c *ConnInfo) Principal() principal.Principal { return *c.principal.Load() }

// SetPrincipal records a successful authentication.
func (c *ConnInfo) SetPrincipal(p principal.Principal) { c.principal.Store(&p) }

type connInfoKey struct{}

// WithConnInfo returns ctx carrying the connection's state.
func WithConnInfo(ctx context.Context, c *ConnInfo) context.Context {
	return context.WithValue(ctx, connInfoKey{}, c)
}

// ConnInfoFrom returns the connection state in ctx, or nil.
func ConnInfoFrom(ctx context.Context) *ConnInfo {
	c, _ := ctx.Value(connInfoKey{}).(*ConnInfo)
	return c
}

// ConnIdentity is the principal and listener of the client connection in
// ctx; false when ctx carries none (local.UsersConfig.Conn).
func ConnIdentity(ctx context.Context) (principal.Principal, string, bool) {
	c := ConnInfoFrom(ctx)
	if c == nil {
		return principal.Anonymous, "", false
	}
	return c.Principal(), c.Listener, true
}

// endpoint is the address to advertise to the client of ctx: its
// listener's, or the configured one when the context names no listener.
type endpoint struct {
	host string
	port int32
}

func (d *Dispatcher) endpoint(ctx context.Context) endpoint {
	if c := ConnInfoFrom(ctx); c != nil && c.Host != "" {
		return endpoint{c.Host, c.Port}
	}
	return endpoint{d.cfg.AdvertisedHost, d.cfg.AdvertisedPort}
}
