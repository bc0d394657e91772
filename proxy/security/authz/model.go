// Package authz decides what a Kafka principal may do, with Kafka's ACL
// model exactly: bindings of (principal, host, operation, allow or deny) to
// a resource pattern (Topic, Group, Cluster, TransactionalId; LITERAL or
// PREFIXED; the literal name "*" for every resource of its type). A deny
// that matches wins; otherwise a matching allow allows; otherwise the
// request is denied, unless the mode says resources without any binding
// are open. Super users bypass every check.
//
// The bindings are compiled into an index that an update replaces
// atomically, so a decision takes no lock on shared state; a Session caches
// one connection's decisions until the bindings change.
//
// Its limit: it knows nothing of where bindings are stored (package
// proxy/security/aclstore) or of Kafka requests (package proxy/apis maps each API to
// its checks); principals are Kafka's strings ("User:alice").
package authz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's names for special values.
const (
	Wildcard         = "*"             // resource name, host or principal name matching all
	ClusterName      = "kafka-cluster" // the one Cluster resource
	WildcardUser     = "User:*"        // every principal of type User
	AnonymousUser    = "User:ANONYMOUS"
	principalTypeSep = ":"
)

// Pattern names the resources a binding applies to.
type Pattern struct {
	Type        kmsg.ACLResourceType        `json:"resource_type"`
	PatternType kmsg.ACLResourcePatternType `json:"pattern_type"`
	Name        string                      `json:"name"`
}

// Entry is who may (or may not) do what, from where.
type Entry struct {
	Principal  string                 `json:"principal"` // "User:alice" or "User:*"
	Host       string                 `json:"host"`      // client IP address or "*"
	Operation  kmsg.ACLOperation      `json:"operation"`
	Permission kmsg.ACLPermissionType `json:"permission"`
}

// Binding is one ACL: an entry bound to a pattern.
type Binding struct {
	Pattern
	Entry
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s from %s on %s:%s:%s",
		b.Principal, b.Permission, b.Operation, b.Host, b.Type, b.PatternType, b.Name)
}

var errInvalid = errors.New("invalid ACL binding")

// Validate checks that b is a concrete binding Kafka would accept in
// CreateAcls: no ANY or MATCH, a known resource type, a principal of the
// form Type:Name.
func (b Binding) Validate() error {
	switch b.Type {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId:
	case kmsg.ACLResourceTypeCluster:
		if b.Name != ClusterName {
			return fmt.Errorf("%w: the cluster resource is named %q, not %q", errInvalid, ClusterName, b.Name)
		}
	default:
		return fmt.Errorf("%w: resource type %s not supported", errInvalid, b.Type)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
	case kmsg.ACLResourcePatternTypePrefixed:
		if b.Name == Wildcard {
			return fmt.Errorf("%w: a prefixed pattern cannot be the wildcard", errInvalid)
		}
	default:
		return fmt.Errorf("%w: pattern type %s is for filters", errInvalid, b.PatternType)
	}
	if b.Name == "" {
		return fmt.Errorf("%w: empty resource name", errInvalid)
	}
	if typ, name, ok := strings.Cut(b.Principal, principalTypeSep); !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q is not Type:Name", errInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host (use %q for any)", errInvalid, Wildcard)
	}
	if b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %s", errInvalid, b.Operation)
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %s", errInvalid, b.Permission)
	}
	return nil
}

// Filter selects bindings, as DescribeAcls and DeleteAcls do: nil fields
// and ANY match everything; pattern type MATCH selects the patterns that
// would apply to Name (literal, wildcard and prefixes of it).
type Filter struct {
	Type        kmsg.ACLResourceType
	PatternType kmsg.ACLResourcePatternType
	Name        *string
	Principal   *string
	Host        *string
	Operation   kmsg.ACLOperation
	Permission  kmsg.ACLPermissionType
}

// ValidateFilter rejects filters Kafka rejects (UNKNOWN values).
func (f Filter) Validate() error {
	switch {
	case f.Type == kmsg.ACLResourceTypeUnknown || f.Type > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: filter resource type %s", errInvalid, f.Type)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: filter pattern type %s", errInvalid, f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: filter operation %s", errInvalid, f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: filter permission %s", errInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether f selects b, with Kafka's filter rules.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b.Pattern) && f.matchesEntry(b.Entry)
}

func (f Filter) matchesPattern(p Pattern) bool {
	if f.Type != kmsg.ACLResourceTypeAny && f.Type != p.Type {
		return false
	}
	anyType := f.PatternType == kmsg.ACLResourcePatternTypeAny
	match := f.PatternType == kmsg.ACLResourcePatternTypeMatch
	if !anyType && !match && f.PatternType != p.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	if !match {
		return *f.Name == p.Name
	}
	switch p.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return *f.Name == p.Name || p.Name == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(*f.Name, p.Name)
	}
	return false
}

func (f Filter) matchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == e.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == e.Permission)
}
