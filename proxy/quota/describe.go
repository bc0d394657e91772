package quota

// PartKind is which part of an entity a filter component is about.
type PartKind uint8

const (
	UserPart PartKind = iota
	ClientPart
)

// MatchKind is how a filter component matches, as Kafka's
// DescribeClientQuotas defines: a name, the default, or any name (not the
// default).
type MatchKind uint8

const (
	MatchExact MatchKind = iota
	MatchDefault
	MatchAny
)

// Component is one term of a DescribeClientQuotas filter.
type Component struct {
	Part  PartKind
	Match MatchKind
	Name  string // for MatchExact
}

// Describe returns the configured entities every component matches; with
// strict, only those that have no part the components do not name.
// Components are assumed to name each part at most once.
func (t *Table) Describe(cs []Component, strict bool) map[Entity]Limits {
	out := map[Entity]Limits{}
	for e, l := range t.entries {
		if describes(e, cs, strict) {
			out[e] = l
		}
	}
	return out
}

func describes(e Entity, cs []Component, strict bool) bool {
	var named [2]bool
	for _, c := range cs {
		p := e.User
		if c.Part == ClientPart {
			p = e.Client
		}
		named[c.Part] = true
		if !p.Set {
			return false
		}
		switch c.Match {
		case MatchExact:
			if p.Default || p.Name != c.Name {
				return false
			}
		case MatchDefault:
			if !p.Default {
				return false
			}
		case MatchAny:
			if p.Default {
				return false
			}
		}
	}
	if strict && ((e.User.Set && !named[UserPart]) || (e.Client.Set && !named[ClientPart])) {
		return false
	}
	return true
}
