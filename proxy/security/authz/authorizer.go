package authz

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Mode is what the authorizer does with a request.
type Mode int

const (
	// AllowAll decides nothing: every principal may do everything (the
	// default, kproxy's behaviour before authorization existed).
	AllowAll Mode = iota
	// ACL enforces the bindings, but a resource that no binding applies to
	// at all is open to everyone (Kafka's allow.everyone.if.no.acl.found),
	// so bindings can be introduced resource by resource.
	ACL
	// DenyByDefault enforces the bindings, and without a matching allow a
	// request is denied (Kafka's default; for production).
	DenyByDefault
)

// ParseMode reads a --authorizer value.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "allow-all":
		return AllowAll, nil
	case "acl":
		return ACL, nil
	case "deny-by-default":
		return DenyByDefault, nil
	}
	return 0, fmt.Errorf("authorizer %q: want allow-all, acl or deny-by-default", s)
}

func (m Mode) String() string {
	switch m {
	case ACL:
		return "acl"
	case DenyByDefault:
		return "deny-by-default"
	}
	return "allow-all"
}

// Query is one authorization question.
type Query struct {
	Principal string // "User:alice"
	Host      string // the client's IP address
	Operation kmsg.ACLOperation
	Resource  kmsg.ACLResourceType
	Name      string
}

// Reason says why a decision came out as it did.
type Reason uint8

const (
	ReasonAllowAll  Reason = iota // the authorizer is off
	ReasonSuperUser               // a configured super user
	ReasonAllowed                 // an allow binding matched and no deny
	ReasonDenied                  // a deny binding matched
	ReasonNoMatch                 // no allow binding matched
	ReasonNoACLs                  // no binding applies to the resource (mode ACL)
)

var reasonNames = [...]string{"allow-all", "super-user", "allowed", "denied", "no-match", "no-acls"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Decision is the answer to a Query.
type Decision struct {
	Allowed bool     // what the bindings say
	DryRun  bool     // computed but not enforced
	Reason  Reason   //
	Binding *Binding // the binding that decided, if one did
}

// Permits reports whether the request may go ahead: allowed, or denied in
// dry-run mode.
func (d Decision) Permits() bool { return d.Allowed || d.DryRun }

// Config configures an Authorizer.
type Config struct {
	Mode       Mode
	DryRun     bool     // compute and report decisions, enforce none
	SuperUsers []string // principals that bypass every check ("User:admin")
}

// Authorizer answers queries against the current bindings. It is safe for
// concurrent use; Update may run while queries do.
type Authorizer struct {
	mode   Mode
	dryRun bool
	super  map[string]bool
	ix     atomic.Pointer[index]
	gen    atomic.Uint64
}

// New returns an authorizer with no bindings.
func New(cfg Config) *Authorizer {
	a := &Authorizer{mode: cfg.Mode, dryRun: cfg.DryRun, super: make(map[string]bool, len(cfg.SuperUsers))}
	for _, s := range cfg.SuperUsers {
		a.super[s] = true
	}
	a.ix.Store(compile(nil, 0))
	return a
}

// Mode is the configured mode.
func (a *Authorizer) Mode() Mode { return a.mode }

// Enabled reports whether decisions are computed at all.
func (a *Authorizer) Enabled() bool { return a.mode != AllowAll }

// Update replaces every binding at once. It takes ownership of bindings.
func (a *Authorizer) Update(bindings []Binding) {
	a.ix.Store(compile(bindings, a.gen.Add(1)))
}

// Bindings returns the current bindings (sorted, without duplicates); the
// caller must not change them.
func (a *Authorizer) Bindings() []Binding { return a.ix.Load().bindings }

// Generation counts updates; cached decisions are valid for one.
func (a *Authorizer) Generation() uint64 { return a.ix.Load().gen }

// IsSuperUser reports whether principal bypasses checks.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize decides q against the current bindings.
func (a *Authorizer) Authorize(q *Query) Decision {
	return a.decide(a.ix.Load(), q)
}

func (a *Authorizer) decide(ix *index, q *Query) Decision {
	switch {
	case a.mode == AllowAll:
		return Decision{Allowed: true, Reason: ReasonAllowAll}
	case a.super[q.Principal]:
		return Decision{Allowed: true, Reason: ReasonSuperUser}
	}
	v := ix.decide(q)
	d := Decision{DryRun: a.dryRun}
	switch {
	case v.deny != nil:
		d.Reason, d.Binding = ReasonDenied, v.deny
	case v.allow != nil:
		d.Allowed, d.Reason, d.Binding = true, ReasonAllowed, v.allow
	case !v.any && a.mode == ACL:
		d.Allowed, d.Reason = true, ReasonNoACLs
	default:
		d.Reason = ReasonNoMatch
	}
	return d
}

// Operations Kafka reports in authorized-operations fields, per resource type.
var (
	TopicOperations = []kmsg.ACLOperation{
		kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDelete,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs,
	}
	ClusterOperations = []kmsg.ACLOperation{
		kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe,
	}
	GroupOperations = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete}
)

// OperationsBits encodes ops as Kafka's authorized-operations bit field
// (bit i set for operation i).
func OperationsBits(ops []kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		bits |= 1 << uint(op)
	}
	return bits
}
