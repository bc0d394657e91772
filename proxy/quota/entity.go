package quota

import (
	"sync"
	"sync/atomic"

	"github.com/kproxy/kproxy/layout"
)

// Type is a quota type Kafka defines for users and client ids.
type Type uint8

const (
	ProducerByteRate  Type = iota // bytes of produce requests per second
	ConsumerByteRate              // bytes of fetch responses per second
	RequestPercentage             // proxy request time, percent of one thread
	// NumTypes is the number of quota types.
	NumTypes
)

var typeNames = [NumTypes]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}

func (t Type) String() string { return typeNames[t] }

// ParseType reads a quota type's Kafka name.
func ParseType(s string) (Type, bool) {
	for i, n := range typeNames {
		if n == s {
			return Type(i), true
		}
	}
	return 0, false
}

// Part is one component of an entity: absent (Set false), the default, or
// a name.
type Part struct {
	Set, Default bool
	Name         string
}

// Named and Default build parts.
func Named(n string) Part { return Part{Set: true, Name: n} }

// DefaultPart is the default entity of its kind.
func DefaultPart() Part { return Part{Set: true, Default: true} }

// Entity is the target of quotas: a user, a client id, or both.
type Entity struct{ User, Client Part }

// FromLayout converts an etcd entity.
func FromLayout(e layout.QuotaEntity) Entity {
	conv := func(n *layout.QuotaEntityName) Part {
		if n == nil {
			return Part{}
		}
		return Part{Set: true, Default: n.Default, Name: n.Name}
	}
	return Entity{User: conv(e.User), Client: conv(e.Client)}
}

// Layout converts to the etcd form.
func (e Entity) Layout() layout.QuotaEntity {
	conv := func(p Part) *layout.QuotaEntityName {
		if !p.Set {
			return nil
		}
		return &layout.QuotaEntityName{Name: p.Name, Default: p.Default}
	}
	return layout.QuotaEntity{User: conv(e.User), Client: conv(e.Client)}
}

// Limits are an entity's quotas; unset types are absent.
type Limits struct {
	Value [NumTypes]float64
	Has   [NumTypes]bool
}

var (
	name   = func(v string) Part { return Named(v) }
	absent = func(string) Part { return Part{} }
	deflt  = func(string) Part { return DefaultPart() }
)

// precedence is Kafka's order; each rung says which entity to look for
// and which of the client's user and client id name its sampler (Kafka's
// quota metric tags: a default entity gives each user or client its own
// rate against the shared limit). The order is Kafka's, most specific first (docs: "Quotas",
// KIP-55): user+client-id, user+default client-id, user, default
// user+client-id, default user+default client-id, default user, client-id,
// default client-id.
var precedence = [...]struct {
	user, client       func(string) Part
	tagUser, tagClient bool
}{
	{name, name, true, true},
	{name, deflt, true, true},
	{name, absent, true, false},
	{deflt, name, true, true},
	{deflt, deflt, true, true},
	{deflt, absent, true, false},
	{absent, name, false, true},
	{absent, deflt, false, true},
}

// Match is the quota that applies to a client for one type: its limit and
// the key of the rate it is measured by.
type Match struct {
	Limit float64
	Key   SamplerKey
	OK    bool
}

// SamplerKey names one measured rate.
type SamplerKey struct {
	Type         Type
	User, Client string
}

// Table is a compiled, immutable set of quotas. Lookups are cached per
// user and client id for the life of the table; a change builds a new one.
type Table struct {
	entries map[Entity]Limits
	none    [NumTypes]Match // the answer of an empty table
	cache   sync.Map        // clientKey -> *[NumTypes]Match
	cached  atomic.Int32
}

// maxCached bounds a table's cache: clients beyond it are resolved on
// every request (eight map lookups) rather than growing memory.
const maxCached = 1 << 14

type clientKey struct{ user, client string }

// NewTable compiles entries.
func NewTable(entries map[Entity]Limits) *Table {
	t := &Table{entries: make(map[Entity]Limits, len(entries))}
	for e, l := range entries {
		t.entries[e] = l
	}
	return t
}

// Entries returns a copy of the configured quotas.
func (t *Table) Entries() map[Entity]Limits {
	out := make(map[Entity]Limits, len(t.entries))
	for e, l := range t.entries {
		out[e] = l
	}
	return out
}

// Lookup returns, for each type, the quota that applies to user and client
// id by Kafka's precedence.
func (t *Table) Lookup(user, client string) *[NumTypes]Match {
	if len(t.entries) == 0 {
		return &t.none // no quotas: no cache entry, no allocation
	}
	k := clientKey{user, client}
	if v, ok := t.cache.Load(k); ok {
		return v.(*[NumTypes]Match)
	}
	var out [NumTypes]Match
	for typ := range NumTypes {
		out[typ] = t.resolve(typ, user, client)
	}
	if t.cached.Load() >= maxCached {
		return &out
	}
	v, loaded := t.cache.LoadOrStore(k, &out)
	if !loaded {
		t.cached.Add(1)
	}
	return v.(*[NumTypes]Match)
}

func (t *Table) resolve(typ Type, user, client string) Match {
	if len(t.entries) == 0 {
		return Match{}
	}
	for _, l := range precedence {
		e := Entity{User: l.user(user), Client: l.client(client)}
		lim, ok := t.entries[e]
		if !ok || !lim.Has[typ] {
			continue
		}
		key := SamplerKey{Type: typ}
		if l.tagUser {
			key.User = user
		}
		if l.tagClient {
			key.Client = client
		}
		return Match{Limit: lim.Value[typ], Key: key, OK: true}
	}
	return Match{}
}
