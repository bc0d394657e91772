package authz

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFilterMatchesKafkaRules(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := bind(topicT, literal, "orders", "User:a", "*", opRead, allow)
	wild := bind(topicT, literal, "*", "User:a", "*", opRead, allow)
	pre := bind(topicT, prefixed, "ord", "User:a", "10.0.0.1", opWrite, deny)
	grp := bind(groupT, literal, "orders", "User:b", "*", opRead, allow)
	all := []Binding{lit, wild, pre, grp}
	anyF := Filter{Type: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	with := func(f func(*Filter)) Filter { g := anyF; f(&g); return g }
	cases := []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"everything", anyF, all},
		{"topic type", with(func(f *Filter) { f.Type = topicT }), []Binding{lit, wild, pre}},
		{"any pattern, exact name", with(func(f *Filter) { f.Name = str("orders") }), []Binding{lit, grp}},
		{"literal pattern", with(func(f *Filter) { f.PatternType = literal }), []Binding{lit, wild, grp}},
		{"prefixed pattern, exact name", with(func(f *Filter) { f.PatternType = prefixed; f.Name = str("ord") }), []Binding{pre}},
		{"prefixed pattern, other name", with(func(f *Filter) { f.PatternType = prefixed; f.Name = str("orders") }), nil},
		{"match: literal, wildcard and prefixes", with(func(f *Filter) {
			f.PatternType = kmsg.ACLResourcePatternTypeMatch
			f.Type = topicT
			f.Name = str("orders")
		}), []Binding{lit, wild, pre}},
		{"match other name: wildcard only", with(func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch; f.Name = str("x") }), []Binding{wild}},
		{"match without a name: all", with(func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeMatch }), all},
		{"principal", with(func(f *Filter) { f.Principal = str("User:b") }), []Binding{grp}},
		{"principal is exact, no wildcard", with(func(f *Filter) { f.Principal = str("User:*") }), nil},
		{"host", with(func(f *Filter) { f.Host = str("10.0.0.1") }), []Binding{pre}},
		{"operation", with(func(f *Filter) { f.Operation = opWrite }), []Binding{pre}},
		{"permission", with(func(f *Filter) { f.Permission = deny }), []Binding{pre}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []Binding
			for _, b := range all {
				if c.f.Matches(b) {
					got = append(got, b)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("matched %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("matched %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := bind(topicT, literal, "t", "User:a", "*", opRead, allow)
	cases := []struct {
		name string
		mod  func(*Binding)
		ok   bool
	}{
		{"good", func(*Binding) {}, true},
		{"match pattern", func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch }, false},
		{"any resource", func(b *Binding) { b.Type = kmsg.ACLResourceTypeAny }, false},
		{"any operation", func(b *Binding) { b.Operation = kmsg.ACLOperationAny }, false},
		{"any permission", func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }, false},
		{"principal without type", func(b *Binding) { b.Principal = "alice" }, false},
		{"empty host", func(b *Binding) { b.Host = "" }, false},
		{"cluster by another name", func(b *Binding) { b.Type = clusterT }, false},
		{"prefixed wildcard", func(b *Binding) { b.PatternType = prefixed; b.Name = "*" }, false},
	}
	for _, c := range cases {
		b := good
		c.mod(&b)
		if err := b.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
