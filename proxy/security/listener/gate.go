package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	keyFetch            = int16(kmsg.Fetch) // one at a time per connection (sequencer.fetchTurn)
)

// authGate is a connection's authentication state. The reader goroutine
// alone uses sess; authed is read by the handshake timer too.
type authGate struct {
	sess   *sasl.Session // nil on listeners without SASL
	authed atomic.Bool
	timer  *time.Timer // closes a connection that does not authenticate in time
}

// authError closes a connection for a security reason.
type authError struct {
	reason string // label of kproxy_connections_rejected_total
	err    error
}

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// errLastRequest: the request just begun is the last one served; its answer
// is written, then the connection closes.
var errLastRequest = errors.New("last request of the connection")

// secure runs the TLS handshake and sets the connection's principal (from
// its certificate on SSL listeners) and SASL state, before any request is
// read. It returns false if the connection was refused.
func (c *clientConn) secure() bool {
	sec := c.s.sec
	if sec == nil {
		return true
	}
	sec.m.accepted.WithLabelValues(c.ln.Name).Inc()
	c.auditEvent(audit.Event{Event: audit.ConnAccepted})
	if tc, ok := c.nc.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(c.ctx, sec.timeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.reject(rejectTLSHandshake, fmt.Errorf("TLS handshake: %w", err))
			return false
		}
		if c.ln.Protocol == SSL {
			p, err := sec.mapper.Principal(first(tc.ConnectionState().PeerCertificates))
			if err != nil {
				c.reject(rejectNoPrincipal, err)
				return false
			}
			c.info.SetPrincipal(p)
			if !p.IsAnonymous() {
				sec.m.auths.WithLabelValues("SSL", "success").Inc()
				c.auditEvent(audit.Event{Event: audit.AuthSuccess, Mechanism: "SSL"})
			}
		}
	}
	if c.ln.Protocol.SASL() {
		if !c.awaitCredentials() {
			return false
		}
		c.gate.sess = sec.auth.NewSession(c.ln.Protocol.TLS())
		c.gate.timer = time.AfterFunc(sec.timeout, func() {
			if !c.gate.authed.Load() {
				c.reject(rejectAuthTimeout, fmt.Errorf("not authenticated within %v", sec.timeout))
			}
		})
	}
	return true
}

// awaitCredentials holds a connection that arrives before this replica has
// loaded the credentials (just after start), rather than failing a valid
// login; the wait is bounded by the handshake timeout.
func (c *clientConn) awaitCredentials() bool {
	ready := c.s.sec.credsReady
	if ready == nil {
		return true
	}
	select {
	case <-ready:
		return true
	default:
	}
	t := time.NewTimer(c.s.sec.timeout)
	defer t.Stop()
	select {
	case <-ready:
		return true
	case <-t.C:
		c.reject(rejectAuthTimeout, errors.New("credentials not loaded from etcd yet"))
	case <-c.ctx.Done():
	}
	return false
}

func first[T any](s []*T) *T {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// reject closes the connection for a security reason, counted and audited.
func (c *clientConn) reject(reason string, err error) {
	c.s.sec.m.rejected.WithLabelValues(reason).Inc()
	if c.s.sec.logs.Allow() {
		c.log.Info("client connection refused", "reason", reason, "err", err)
	}
	c.close(fmt.Errorf("%s: %w", reason, err))
}

func (c *clientConn) auditEvent(e audit.Event) {
	if c.s.sec == nil || c.s.sec.audit == nil {
		return
	}
	e.Listener, e.Client, e.Conn = c.ln.Name, c.nc.RemoteAddr().String(), c.id
	if e.Principal == "" {
		e.Principal = c.info.Principal().String()
	}
	c.s.sec.audit.Write(e)
}

// frameLimit is the largest frame the connection may send now: 512 KiB
// until it has authenticated.
func (c *clientConn) frameLimit() int32 {
	if c.gate.sess != nil && !c.gate.sess.Authenticated() {
		return min(c.s.cfg.MaxFrameBytes, maxUnauthenticatedFrame)
	}
	return c.s.cfg.MaxFrameBytes
}

// gateRequest lets a request through (nil call), answers it here (SASL),
// or refuses it. last means the call is the connection's last.
func (c *clientConn) gateRequest(h *reqHeader, body []byte) (cl call, last bool, err error) {
	g := &c.gate
	isSASL := h.Key == keySaslHandshake || h.Key == keySaslAuthenticate
	switch {
	case g.sess == nil: // the dispatcher answers SASL with ILLEGAL_SASL_STATE
		return nil, false, nil
	case !isSASL && g.sess.Authenticated():
		if g.sess.Expired(time.Now()) {
			return nil, false, &authError{rejectExpired, errors.New("session expired without re-authentication")}
		}
		return nil, false, nil
	case !isSASL && h.Key == keyApiVersions:
		return nil, false, nil
	case !isSASL:
		return nil, false, &authError{rejectBeforeAuth, fmt.Errorf("%s before authentication", apiName(h.Key))}
	}
	var o sasl.Outcome
	if h.Key == keySaslHandshake {
		o, err = g.sess.Handshake(h.Version, body)
	} else {
		o, err = g.sess.Authenticate(h.Version, body)
	}
	if err != nil {
		return nil, false, &authError{rejectSASLProtocol, err}
	}
	return c.outcome(o), o.Fail || o.Close, nil
}

// rawToken answers a raw SASL token (after SaslHandshake v0).
func (c *clientConn) rawToken(token []byte) (call, bool) {
	o := c.gate.sess.RawToken(token)
	return c.outcome(o), o.Fail
}

// outcome records what a SASL step did and returns its answer.
func (c *clientConn) outcome(o sasl.Outcome) call {
	sec := c.s.sec
	lc := &localCall{reply: apis.Reply{Body: o.Body, NoResponse: o.Body == nil}}
	switch {
	case o.Done:
		c.info.SetPrincipal(o.Principal)
		c.gate.authed.Store(true)
		c.gate.timer.Stop()
		sec.m.auths.WithLabelValues(o.Mechanism, "success").Inc()
		kind := audit.AuthSuccess
		if o.Reauth {
			kind = audit.Reauthenticated
		}
		c.auditEvent(audit.Event{Event: kind, Mechanism: o.Mechanism, Principal: o.Principal.String()})
		c.log.Debug("client authenticated", "principal", o.Principal.String(), "mechanism", o.Mechanism, "reauth", o.Reauth, "lifetime", o.Lifetime)
	case o.Fail:
		lc.delay = sec.auth.FailureDelay()
		sec.m.auths.WithLabelValues(o.Mechanism, "failure").Inc()
		sec.m.rejected.WithLabelValues(rejectAuthFailed).Inc()
		c.auditEvent(audit.Event{Event: audit.AuthFailure, Mechanism: o.Mechanism, Reason: o.Reason})
		if sec.logs.Allow() {
			c.log.Info("client authentication failed", "mechanism", o.Mechanism, "reason", o.Reason)
		}
	case o.Close:
		sec.m.rejected.WithLabelValues(rejectSASLProtocol).Inc()
		c.auditEvent(audit.Event{Event: audit.AuthFailure, Mechanism: o.Mechanism, Reason: o.Reason})
		if sec.logs.Allow() {
			c.log.Info("client SASL exchange refused", "mechanism", o.Mechanism, "reason", o.Reason)
		}
	}
	return lc
}

// localCall is a request the connection answered itself, after delay.
type localCall struct {
	reply apis.Reply
	delay time.Duration
}

func (l *localCall) Finish(ctx context.Context) (apis.Reply, error) {
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

// closeSecurity ends the connection's security state.
func (c *clientConn) closeSecurity() {
	if c.gate.timer != nil {
		c.gate.timer.Stop()
	}
	if c.s.sec != nil {
		e := audit.Event{Event: audit.ConnClosed}
		if cause := context.Cause(c.ctx); cause != nil && !errors.Is(cause, errConnClosed) {
			e.Reason = cause.Error()
		}
		c.auditEvent(e)
	}
}
