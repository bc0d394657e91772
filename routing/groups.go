package routing

import (
	"hash/maphash"
	"sync/atomic"
)

// groupMap holds coordinators for many groups. It is sharded copy-on-write:
// a lookup is one atomic load and one typed map lookup (lock-free, no
// allocation); a coordinator change for a known group is one atomic store;
// only adding or removing a group copies one shard (1/groupShards of the
// groups). sync.Map was not chosen: its any-typed API boxes the string key
// on every lookup (an allocation on the hot path) and needs type assertions.
type groupMap struct {
	seed   maphash.Seed
	shards [groupShards]atomic.Pointer[map[string]*groupCell]
}

const groupShards = 256

// groupCell holds a group's ownership value (coordinator and epoch).
type groupCell struct{ v atomic.Uint64 }

func newGroupMap() *groupMap {
	g := &groupMap{seed: maphash.MakeSeed()}
	for i := range g.shards {
		m := map[string]*groupCell{}
		g.shards[i].Store(&m)
	}
	return g
}

func (g *groupMap) shardIndex(group string) int {
	return int(maphash.String(g.seed, group) % groupShards)
}

func (g *groupMap) shard(group string) *atomic.Pointer[map[string]*groupCell] {
	return &g.shards[g.shardIndex(group)]
}

func (g *groupMap) get(group string) uint64 {
	if s := (*g.shard(group).Load())[group]; s != nil {
		return s.v.Load()
	}
	return 0
}

// update applies f to the group's ownership value, adding or removing the
// group as needed. It returns the old and new values. Writers only.
func (g *groupMap) update(group string, f func(uint64) uint64) (old, cur uint64) {
	sh := g.shard(group)
	m := *sh.Load()
	s := m[group]
	if s != nil {
		old = s.v.Load()
	}
	cur = f(old)
	switch {
	case s != nil && cur != 0:
		s.v.Store(cur)
	case s == nil && cur != 0:
		s = &groupCell{}
		s.v.Store(cur)
		sh.Store(copyWith(m, group, s))
	case s != nil && cur == 0:
		sh.Store(copyWith(m, group, nil))
	}
	return old, cur
}

// copyWith returns a copy of m with group set to s (or removed if s is nil).
func copyWith(m map[string]*groupCell, group string, s *groupCell) *map[string]*groupCell {
	n := make(map[string]*groupCell, len(m)+1)
	for k, v := range m {
		n[k] = v
	}
	if s == nil {
		delete(n, group)
	} else {
		n[group] = s
	}
	return &n
}

// each calls f for every group; order is unspecified.
func (g *groupMap) each(f func(group string, v uint64)) {
	for i := range g.shards {
		for k, s := range *g.shards[i].Load() {
			f(k, s.v.Load())
		}
	}
}
