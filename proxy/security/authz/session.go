package authz

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxCached bounds a session's cache; a connection touching more distinct
// resources than this starts over, so memory stays bounded.
const maxCached = 4096

// Session is one connection's view of the authorizer: its principal and
// client host, and the decisions made so far for the current bindings.
// The lock is the connection's own, not shared with other connections.
type Session struct {
	a         *Authorizer
	principal string
	host      string
	listener  string

	mu    sync.Mutex
	gen   uint64
	cache map[cacheKey]Decision
}

type cacheKey struct {
	name string
	rt   kmsg.ACLResourceType
	op   kmsg.ACLOperation
}

// Session returns a session for a connection of principal from host, on a
// listener (named in audit events).
func (a *Authorizer) Session(principal, host, listener string) *Session {
	return &Session{a: a, principal: principal, host: host, listener: listener}
}

// Listener is the name of the session's listener.
func (s *Session) Listener() string { return s.listener }

// Principal is the session's principal.
func (s *Session) Principal() string { return s.principal }

// Host is the session's client host.
func (s *Session) Host() string { return s.host }

// Authorizer is the authorizer s asks.
func (s *Session) Authorizer() *Authorizer { return s.a }

// Authorize decides op on resource (rt, name), from the cache when the
// bindings have not changed since it was decided. The second result says
// whether it came from the cache.
func (s *Session) Authorize(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) (Decision, bool) {
	a := s.a
	if a.mode == AllowAll {
		return Decision{Allowed: true, Reason: ReasonAllowAll}, true
	}
	ix := a.ix.Load()
	k := cacheKey{name: name, rt: rt, op: op}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != ix.gen || len(s.cache) >= maxCached {
		clear(s.cache)
		s.gen = ix.gen
	}
	if d, ok := s.cache[k]; ok {
		return d, true
	}
	d := a.decide(ix, &Query{Principal: s.principal, Host: s.host, Operation: op, Resource: rt, Name: name})
	if s.cache == nil {
		s.cache = make(map[cacheKey]Decision)
	}
	s.cache[k] = d
	return d, false
}

// Operations returns the bit field of ops (see OperationsBits) that s may
// perform on the resource.
func (s *Session) Operations(rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		if d, _ := s.Authorize(op, rt, name); d.Allowed {
			bits |= 1 << uint(op)
		}
	}
	return bits
}
