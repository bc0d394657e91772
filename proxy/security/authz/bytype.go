package authz

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AnyAllowed reports whether the session may perform op on at least one
// resource of type rt, as Kafka's authorizeByResourceType decides it (an
// idempotent producer's InitProducerId needs Write on some topic): some
// allow applies whose pattern no deny covers (a literal deny of the same
// name, a deny prefix of it, or the wildcard deny). Not cached: the APIs
// that ask are rare.
func (s *Session) AnyAllowed(op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	a := s.a
	if a.mode == AllowAll || a.super[s.principal] {
		return true
	}
	q := &Query{Principal: s.principal, Host: s.host, Operation: op, Resource: rt}
	var granted, denies []Pattern
	typed := false
	bs := a.ix.Load().bindings
	for i := range bs {
		b := &bs[i]
		if b.Type != rt {
			continue
		}
		typed = true
		if !b.appliesTo(q) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll):
			denies = append(denies, b.Pattern)
		case b.Permission == kmsg.ACLPermissionTypeAllow && allows(b.Operation, op):
			granted = append(granted, b.Pattern)
		}
	}
	if !typed && a.mode == ACL {
		return true
	}
	for _, p := range granted {
		if !covered(p, denies) {
			return true
		}
	}
	return false
}

// covered reports whether a deny in denies applies to everything allow
// does.
func covered(allow Pattern, denies []Pattern) bool {
	for _, d := range denies {
		switch {
		case d.PatternType == kmsg.ACLResourcePatternTypeLiteral && d.Name == Wildcard:
			return true
		case d.PatternType == kmsg.ACLResourcePatternTypePrefixed && allow.Name != Wildcard && strings.HasPrefix(allow.Name, d.Name):
			return true
		case d.PatternType == kmsg.ACLResourcePatternTypeLiteral && allow.PatternType == kmsg.ACLResourcePatternTypeLiteral && d.Name == allow.Name:
			return true
		}
	}
	return false
}
