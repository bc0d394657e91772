package sasl

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

type state uint8

const (
	stHandshake    state = iota // waiting for SaslHandshake
	stAuthenticate              // handshake v1 done: SaslAuthenticate next
	stRawToken                  // handshake v0 done: raw tokens next
	stDone                      // authenticated, no exchange in progress
	stFailed
)

// Session is one connection's SASL state. It is used from the connection's
// reader only, so it needs no lock.
type Session struct {
	a     *Authenticator
	tls   bool
	st    state
	mechs []string // offered on this connection

	mech   string // of the exchange in progress, then of the session
	ex     exchange
	reauth bool // the exchange in progress re-authenticates

	authenticated bool
	principal     principal.Principal
	expiry        time.Time // zero: never
}

// NewSession starts the state of a new connection; tls says whether it
// runs over TLS (PLAIN is offered only then, unless configured otherwise).
func (a *Authenticator) NewSession(tls bool) *Session {
	return &Session{a: a, tls: tls, mechs: a.mechanisms(tls)}
}

// Outcome is what the connection does with one SASL request.
type Outcome struct {
	// Body is the encoded response body; for a raw token exchange (after
	// SaslHandshake v0) the raw token to send. Nil: send nothing.
	Body []byte
	// Fail: authentication failed. Send Body after the failure delay, then
	// close the connection.
	Fail bool
	// Close: send Body, then close the connection (a step out of order or
	// an unsupported mechanism before authentication).
	Close bool
	// Done: an authentication (Reauth: a re-authentication) just
	// succeeded, as Principal, for Lifetime (0: unlimited).
	Done      bool
	Reauth    bool
	Mechanism string
	Principal principal.Principal
	Lifetime  time.Duration
	// Reason says why it failed, for the audit log; never sent.
	Reason string
}

// Authenticated reports whether the connection has authenticated.
func (s *Session) Authenticated() bool { return s.authenticated }

// Principal is who authenticated (valid once Authenticated).
func (s *Session) Principal() principal.Principal { return s.principal }

// Mechanism is the mechanism of the session.
func (s *Session) Mechanism() string { return s.mech }

// RawNext reports whether the next frame is a raw SASL token (after
// SaslHandshake v0), not a Kafka request.
func (s *Session) RawNext() bool { return s.st == stRawToken }

// Expired reports whether the session's lifetime has passed: the
// connection must re-authenticate before serving anything else.
func (s *Session) Expired(now time.Time) bool {
	return s.authenticated && !s.expiry.IsZero() && now.After(s.expiry)
}

// Handshake answers a SaslHandshake request.
func (s *Session) Handshake(version int16, body []byte) (Outcome, error) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return Outcome{}, fmt.Errorf("decode SaslHandshake v%d: %w", version, err)
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = version
	resp.SupportedMechanisms = s.mechs
	out := Outcome{Mechanism: req.Mechanism, Principal: s.principal}
	reauth := s.authenticated
	switch {
	case s.st != stHandshake && s.st != stDone:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		out.Close, out.Reason = true, "SaslHandshake during an exchange"
	case !slices.Contains(s.mechs, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		out.Close, out.Reason = true, "unsupported mechanism"
	case reauth && (req.Mechanism != s.mech || version < 1):
		// KIP-368: re-authentication keeps the mechanism and uses
		// SaslAuthenticate.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		out.Close, out.Reason = true, "re-authentication must use the session's mechanism with SaslHandshake v1"
	default:
		ex, err := s.a.newExchange(req.Mechanism)
		if err != nil {
			return Outcome{}, err
		}
		s.ex, s.mech, s.reauth = ex, req.Mechanism, reauth
		s.st = stAuthenticate
		if version == 0 {
			s.st = stRawToken
		}
	}
	if out.Close {
		s.st = stFailed
	}
	out.Body = resp.AppendTo(nil)
	return out, nil
}

// Authenticate answers a SaslAuthenticate request.
func (s *Session) Authenticate(version int16, body []byte) (Outcome, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return Outcome{}, fmt.Errorf("decode SaslAuthenticate v%d: %w", version, err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = version
	if s.st != stAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake v1 before it")
		// An authenticated connection just gets the error, as from a
		// broker's request handler; before authentication it is closed.
		out := Outcome{Body: resp.AppendTo(nil), Close: !s.authenticated, Reason: "SaslAuthenticate out of order"}
		if out.Close {
			s.st = stFailed
		}
		return out, nil
	}
	o := s.step(req.SASLAuthBytes)
	switch {
	case o.Fail:
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mech)
	case o.Done:
		resp.SessionLifetimeMillis = o.Lifetime.Milliseconds()
	}
	resp.SASLAuthBytes = o.Body
	o.Body = resp.AppendTo(nil)
	return o, nil
}

// RawToken answers a raw token sent after SaslHandshake v0: the answer is
// the raw token to send back; a failure sends nothing.
func (s *Session) RawToken(token []byte) Outcome {
	o := s.step(token)
	if o.Body == nil && !o.Fail {
		o.Body = []byte{} // an empty token still goes out
	}
	if o.Fail {
		o.Body = nil
	}
	return o
}

// step runs the exchange one message further.
func (s *Session) step(in []byte) Outcome {
	o := Outcome{Mechanism: s.mech, Reauth: s.reauth, Principal: s.principal}
	out, done, err := s.ex.step(in)
	if err != nil {
		s.st = stFailed
		o.Fail, o.Reason = true, err.Error()
		return o
	}
	o.Body = out
	if !done {
		return o
	}
	p, tokenExpiry := s.ex.result()
	o.Principal = p
	if s.reauth && p != s.principal {
		s.st = stFailed
		o.Fail, o.Reason = true, "re-authentication as "+p.String()+", not the session's "+s.principal.String()
		return o
	}
	now := s.a.cfg.Now()
	life := s.a.cfg.MaxSession
	if !tokenExpiry.IsZero() {
		left := tokenExpiry.Sub(now)
		if left <= 0 {
			s.st = stFailed
			o.Fail, o.Reason = true, "token expired"
			return o
		}
		if life == 0 || left < life {
			life = left
		}
	}
	s.expiry = time.Time{}
	if life > 0 {
		s.expiry = now.Add(life)
	}
	s.st, s.ex, s.authenticated, s.principal = stDone, nil, true, p
	o.Done, o.Lifetime = true, life
	return o
}
