package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/sasl"
)

const (
	keyApiVersions      = int16(kmsg.ApiVersions)
	keySaslHandshake    = int16(kmsg.SASLHandshake)
	keySaslAuthenticate = int16(kmsg.SASLAuthenticate)
)

// Conn is what a Gate knows of its client connection.
type Conn struct {
	ID       uint64
	NC       net.Conn // as Bound.Wrap returned it
	Listener *Bound
	Info     *apis.ConnInfo // the principal is set here
	Log      *slog.Logger
	// Close ends the connection at once with a cause; the handshake timer
	// calls it from its own goroutine.
	Close func(cause error)
}

// Gate is one client connection's authentication state. The zero Gate,
// or one Init gave no Auth, lets every request through. The connection's
// reader goroutine alone calls its methods; authed is read by the
// handshake timer too.
type Gate struct {
	a      *Auth
	c      Conn
	sess   *sasl.Session // nil on listeners without SASL
	authed atomic.Bool
	timer  *time.Timer // closes a connection that does not authenticate in time
}

// Init readies g for connection c under a (nil: no security).
func (g *Gate) Init(a *Auth, c Conn) { g.a, g.c = a, c }

// Refused closes a connection for a security reason (Gate.Refuse).
type Refused struct {
	Reason string // label of kproxy_connections_rejected_total
	Err    error
}

func (e *Refused) Error() string { return e.Err.Error() }
func (e *Refused) Unwrap() error { return e.Err }

// Open runs the TLS handshake and sets the connection's principal (from
// its certificate on SSL listeners) and SASL state, before any request is
// read; ctx is the connection's. It returns false if the connection was
// refused (and closed).
func (g *Gate) Open(ctx context.Context) bool {
	sec := g.a
	if sec == nil {
		return true
	}
	ln := g.c.Listener
	sec.m.accepted.WithLabelValues(ln.Name).Inc()
	g.auditEvent(audit.Event{Event: audit.ConnAccepted})
	if tc, ok := g.c.NC.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(ctx, sec.timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			g.Refuse(rejectTLSHandshake, fmt.Errorf("TLS handshake: %w", err))
			return false
		}
		if ln.Protocol == SSL {
			p, err := sec.mapper.Principal(first(tc.ConnectionState().PeerCertificates))
			if err != nil {
				g.Refuse(rejectNoPrincipal, err)
				return false
			}
			g.c.Info.SetPrincipal(p)
			if !p.IsAnonymous() {
				sec.m.auths.WithLabelValues("SSL", "success").Inc()
				g.auditEvent(audit.Event{Event: audit.AuthSuccess, Mechanism: "SSL"})
			}
		}
	}
	if ln.Protocol.SASL() {
		if !g.awaitCredentials(ctx) {
			return false
		}
		g.sess = sec.auth.NewSession(ln.Protocol.TLS())
		g.timer = time.AfterFunc(sec.timeout, func() {
			if !g.authed.Load() {
				g.Refuse(rejectAuthTimeout, fmt.Errorf("not authenticated within %v", sec.timeout))
			}
		})
	}
	return true
}

// awaitCredentials holds a connection that arrives before this replica has
// loaded the credentials (just after start), rather than failing a valid
// login; the wait is bounded by the handshake timeout.
func (g *Gate) awaitCredentials(ctx context.Context) bool {
	ready := g.a.credsReady
	if ready == nil {
		return true
	}
	select {
	case <-ready:
		return true
	default:
	}
	t := time.NewTimer(g.a.timeout)
	defer t.Stop()
	select {
	case <-ready:
		return true
	case <-t.C:
		g.Refuse(rejectAuthTimeout, errors.New("credentials not loaded from etcd yet"))
	case <-ctx.Done():
	}
	return false
}

func first[T any](s []*T) *T {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// Refuse closes the connection for a security reason, counted and audited.
func (g *Gate) Refuse(reason string, err error) {
	g.a.m.rejected.WithLabelValues(reason).Inc()
	if g.a.logs.Allow() {
		g.c.Log.Info("client connection refused", "reason", reason, "err", err)
	}
	g.c.Close(fmt.Errorf("%s: %w", reason, err))
}

func (g *Gate) auditEvent(e audit.Event) {
	if g.a == nil || g.a.audit == nil {
		return
	}
	e.Listener, e.Client, e.Conn = g.c.Listener.Name, g.c.NC.RemoteAddr().String(), g.c.ID
	if e.Principal == "" {
		e.Principal = g.c.Info.Principal().String()
	}
	g.a.audit.Write(e)
}

// FrameLimit is the largest frame the connection may send now, of at most
// max: 512 KiB until it has authenticated.
func (g *Gate) FrameLimit(max int32) int32 {
	if g.sess != nil && !g.sess.Authenticated() {
		return min(max, maxUnauthenticatedFrame)
	}
	return max
}

// RawNext says whether the next frame is a raw SASL token (after
// SaslHandshake v0) rather than a request.
func (g *Gate) RawNext() bool { return g.sess != nil && g.sess.RawNext() }

// Request lets a request through (nil answer), answers it here (SASL), or
// refuses it (a *Refused error). last means the answer is the
// connection's last.
func (g *Gate) Request(key, version int16, body []byte) (a *Answer, last bool, err error) {
	isSASL := key == keySaslHandshake || key == keySaslAuthenticate
	switch {
	case g.sess == nil: // the dispatcher answers SASL with ILLEGAL_SASL_STATE
		return nil, false, nil
	case !isSASL && g.sess.Reauthenticating():
		return nil, false, midReauth(key)
	case !isSASL && g.sess.Authenticated():
		if g.sess.Expired(time.Now()) {
			return nil, false, &Refused{rejectExpired, errors.New("session expired without re-authentication")}
		}
		return nil, false, nil
	case !isSASL && key == keyApiVersions:
		return nil, false, nil
	case !isSASL:
		name := kmsg.NameForKey(key)
		if name == "" {
			name = "Unknown"
		}
		return nil, false, &Refused{rejectBeforeAuth, fmt.Errorf("%s before authentication", name)}
	}
	var o sasl.Outcome
	if key == keySaslHandshake {
		o, err = g.sess.Handshake(version, body)
	} else {
		o, err = g.sess.Authenticate(version, body)
	}
	if err != nil {
		return nil, false, &Refused{rejectSASLProtocol, err}
	}
	return g.outcome(o), o.Fail || o.Close, nil
}

// RawToken answers a raw SASL token (after SaslHandshake v0).
func (g *Gate) RawToken(token []byte) (*Answer, bool) {
	o := g.sess.RawToken(token)
	return g.outcome(o), o.Fail
}

// outcome records what a SASL step did and returns its answer.
func (g *Gate) outcome(o sasl.Outcome) *Answer {
	sec := g.a
	lc := &Answer{reply: apis.Reply{Body: o.Body, NoResponse: o.Body == nil}}
	switch {
	case o.Done:
		g.c.Info.SetPrincipal(o.Principal)
		g.authed.Store(true)
		g.timer.Stop()
		sec.m.auths.WithLabelValues(o.Mechanism, "success").Inc()
		kind := audit.AuthSuccess
		if o.Reauth {
			kind = audit.Reauthenticated
		}
		g.auditEvent(audit.Event{Event: kind, Mechanism: o.Mechanism, Principal: o.Principal.String()})
		g.c.Log.Debug("client authenticated", "principal", o.Principal.String(), "mechanism", o.Mechanism, "reauth", o.Reauth, "lifetime", o.Lifetime)
	case o.Fail:
		lc.delay = sec.auth.FailureDelay()
		sec.m.auths.WithLabelValues(o.Mechanism, "failure").Inc()
		sec.m.rejected.WithLabelValues(rejectAuthFailed).Inc()
		g.auditEvent(audit.Event{Event: audit.AuthFailure, Mechanism: o.Mechanism, Reason: o.Reason})
		if sec.logs.Allow() {
			g.c.Log.Info("client authentication failed", "mechanism", o.Mechanism, "reason", o.Reason)
		}
	case o.Close:
		sec.m.rejected.WithLabelValues(rejectSASLProtocol).Inc()
		g.auditEvent(audit.Event{Event: audit.AuthFailure, Mechanism: o.Mechanism, Reason: o.Reason})
		if sec.logs.Allow() {
			g.c.Log.Info("client SASL exchange refused", "mechanism", o.Mechanism, "reason", o.Reason)
		}
	}
	return lc
}

// Answer is a request the gate answered itself, after a delay (a failed
// authentication waits before it is told).
type Answer struct {
	reply apis.Reply
	delay time.Duration
}

// Finish waits out the delay and returns the answer.
func (l *Answer) Finish(ctx context.Context) (apis.Reply, error) {
	if l.delay > 0 {
		t := time.NewTimer(l.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return apis.Reply{}, ctx.Err()
		}
	}
	return l.reply, nil
}

// Close ends the connection's security state; cause is why the connection
// closed (nil: the ordinary end), audited.
func (g *Gate) Close(cause error) {
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.a != nil {
		e := audit.Event{Event: audit.ConnClosed}
		if cause != nil {
			e.Reason = cause.Error()
		}
		g.auditEvent(e)
	}
}
