package authz

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// index is a compiled, immutable set of bindings. Per resource type it
// keeps the literal patterns in a map by name, the wildcard ("*") bindings
// in a list, and the prefixed patterns in a map by prefix together with the
// distinct prefix lengths, so that the patterns applying to a name are
// found with one map lookup per length, without scanning every binding.
type index struct {
	gen      uint64
	bindings []Binding // every binding, sorted, deduplicated
	types    [numTypes]typeIndex
}

const numTypes = int(kmsg.ACLResourceTypeTransactionalId) + 1

type typeIndex struct {
	literal  map[string]*bucket
	wildcard *bucket
	prefixed map[string]*bucket
	lens     []int // distinct prefix lengths, ascending
}

// bucket holds the bindings of one pattern by principal, so that a
// decision looks only at the bindings of its principal and of User:*.
type bucket struct {
	byPrincipal map[string][]*Binding
}

func (b *bucket) add(bd *Binding) {
	if b.byPrincipal == nil {
		b.byPrincipal = make(map[string][]*Binding)
	}
	b.byPrincipal[bd.Principal] = append(b.byPrincipal[bd.Principal], bd)
}

func addTo(m *map[string]*bucket, name string, bd *Binding) {
	if *m == nil {
		*m = make(map[string]*bucket)
	}
	b := (*m)[name]
	if b == nil {
		b = &bucket{}
		(*m)[name] = b
	}
	b.add(bd)
}

// compile builds the index of bindings (which it may reorder); invalid
// bindings are skipped (the store validates them before they get here).
func compile(bindings []Binding, gen uint64) *index {
	slices.SortFunc(bindings, compareBindings)
	bindings = slices.Compact(bindings)
	ix := &index{gen: gen, bindings: bindings}
	for i := range bindings {
		b := &bindings[i]
		if b.Validate() != nil {
			continue
		}
		t := &ix.types[b.Type]
		switch {
		case b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			addTo(&t.prefixed, b.Name, b)
			if n := len(b.Name); !slices.Contains(t.lens, n) {
				t.lens = append(t.lens, n)
			}
		case b.Name == Wildcard:
			if t.wildcard == nil {
				t.wildcard = &bucket{}
			}
			t.wildcard.add(b)
		default:
			addTo(&t.literal, b.Name, b)
		}
	}
	for i := range ix.types {
		slices.Sort(ix.types[i].lens)
	}
	return ix
}

func compareBindings(a, b Binding) int {
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if a.Type != b.Type {
		return int(a.Type) - int(b.Type)
	}
	if a.PatternType != b.PatternType {
		return int(a.PatternType) - int(b.PatternType)
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	if a.Operation != b.Operation {
		return int(a.Operation) - int(b.Operation)
	}
	return int(a.Permission) - int(b.Permission)
}

// verdict is what the bindings applying to one request say.
type verdict struct {
	deny, allow *Binding // the first matching deny and allow
	any         bool     // some binding applies to the resource at all
}

// decide scans the bindings whose pattern applies to the resource.
func (ix *index) decide(q *Query) verdict {
	var v verdict
	if q.Resource < 0 || int(q.Resource) >= numTypes {
		return v
	}
	t := &ix.types[q.Resource]
	v.scan(t.literal[q.Name], q)
	v.scan(t.wildcard, q)
	for _, n := range t.lens {
		if n > len(q.Name) {
			break
		}
		v.scan(t.prefixed[q.Name[:n]], q)
	}
	return v
}

func (v *verdict) scan(bk *bucket, q *Query) {
	if bk == nil {
		return
	}
	v.any = true
	v.scanList(bk.byPrincipal[q.Principal], q)
	if q.Principal != WildcardUser {
		v.scanList(bk.byPrincipal[WildcardUser], q)
	}
}

func (v *verdict) scanList(bs []*Binding, q *Query) {
	for _, b := range bs {
		if v.deny != nil || !b.appliesTo(q) {
			continue
		}
		if b.Permission == kmsg.ACLPermissionTypeDeny {
			if b.Operation == q.Operation || b.Operation == kmsg.ACLOperationAll {
				v.deny = b
			}
		} else if v.allow == nil && allows(b.Operation, q.Operation) {
			v.allow = b
		}
	}
}

// appliesTo matches the binding's principal and host.
func (b *Binding) appliesTo(q *Query) bool {
	return (b.Principal == q.Principal || b.Principal == WildcardUser) &&
		(b.Host == q.Host || b.Host == Wildcard)
}

// allows reports whether an allow for granted permits op: ALL permits
// everything; Read, Write, Delete and Alter imply Describe; AlterConfigs
// implies DescribeConfigs (Kafka's implications; Create implies nothing).
func allows(granted, op kmsg.ACLOperation) bool {
	switch {
	case granted == op, granted == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}
