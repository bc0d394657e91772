package routing

import "sync/atomic"

// Builder collects a complete table (e.g. from an etcd listing) for Replace.
// It is plain data, not safe for concurrent use, and cheap to fill: no
// copy-on-write per entry.
type Builder struct {
	brokers map[int32]Broker
	topics  map[string]*topicBuild
	groups  map[string]uint64
}

type topicBuild struct {
	info       Topic
	known      bool
	ownerships map[int32]uint64 // by partition
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{brokers: map[int32]Broker{}, topics: map[string]*topicBuild{}, groups: map[string]uint64{}}
}

// SetBroker adds a live broker.
func (b *Builder) SetBroker(br Broker) { b.brokers[br.ID] = br }

// SetTopic adds a topic.
func (b *Builder) SetTopic(tp Topic) {
	tb := b.topic(tp.Name)
	tb.info, tb.known = tp, true
}

// SetOwner records a partition's owner key.
func (b *Builder) SetOwner(topic string, p, broker int32) {
	b.updatePartition(topic, p, func(v uint64) uint64 { return withOwner(v, max(broker, -1)) })
}

// SetEpoch records a partition's leader epoch.
func (b *Builder) SetEpoch(topic string, p, epoch int32) {
	b.updatePartition(topic, p, func(v uint64) uint64 { return withEpoch(v, max(epoch, -1)) })
}

// SetOwnerAndEpoch records a partition's owner and leader epoch.
func (b *Builder) SetOwnerAndEpoch(topic string, p, broker, epoch int32) {
	b.updatePartition(topic, p, func(uint64) uint64 { return pack(max(broker, -1), max(epoch, -1)) })
}

// SetCoordinatorAndEpoch records a group's coordinator and its epoch.
func (b *Builder) SetCoordinatorAndEpoch(group string, broker, epoch int32) {
	b.updateGroup(group, pack(max(broker, -1), max(epoch, -1)))
}

// SetCoordinator records a group's coordinator key.
func (b *Builder) SetCoordinator(group string, broker int32) {
	b.updateGroup(group, withOwner(b.groups[group], max(broker, -1)))
}

// SetCoordinatorEpoch records a group's coordinator epoch.
func (b *Builder) SetCoordinatorEpoch(group string, epoch int32) {
	b.updateGroup(group, withEpoch(b.groups[group], max(epoch, -1)))
}

func (b *Builder) updateGroup(group string, v uint64) {
	if v == 0 {
		delete(b.groups, group)
		return
	}
	b.groups[group] = v
}

func (b *Builder) topic(name string) *topicBuild {
	tb := b.topics[name]
	if tb == nil {
		tb = &topicBuild{info: Topic{Name: name}, ownerships: map[int32]uint64{}}
		b.topics[name] = tb
	}
	return tb
}

func (b *Builder) updatePartition(topic string, p int32, f func(uint64) uint64) {
	if p < 0 {
		return
	}
	tb := b.topic(topic)
	if v := f(tb.ownerships[p]); v != 0 {
		tb.ownerships[p] = v
	} else {
		delete(tb.ownerships, p)
	}
}

// Replace makes the table hold exactly what b holds, in one atomic step:
// readers see either the old table or the new one, never a mix. b must not
// be used afterwards.
func (t *Table) Replace(b *Builder) {
	st, owners := b.build()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Store(st)
	t.owners.Store(owners)
	t.changed()
}

func (b *Builder) build() (*state, int64) {
	st := &state{
		brokers: newBrokerSet(b.brokers),
		topics:  make(map[string]*topicRef, len(b.topics)),
		groups:  newGroupMap(),
	}
	var owners int64
	for name, tb := range b.topics {
		if !tb.known && len(tb.ownerships) == 0 {
			continue
		}
		ref := &topicRef{used: len(tb.ownerships)}
		e := &topicEntry{info: tb.info, known: tb.known}
		if tb.known {
			e.cells = make([]atomic.Uint64, clampPartitions(tb.info.Partitions))
		}
		for p, v := range tb.ownerships {
			if int64(p) < int64(len(e.cells)) {
				e.cells[p].Store(v)
			} else {
				ref.setOverflow(p, v)
			}
			if o, _ := unpack(v); o >= 0 {
				owners++
			}
		}
		ref.cur.Store(e)
		st.topics[name] = ref
	}
	shards := make([]map[string]*groupCell, groupShards)
	for g, v := range b.groups {
		i := st.groups.shardIndex(g)
		if shards[i] == nil {
			shards[i] = map[string]*groupCell{}
		}
		s := &groupCell{}
		s.v.Store(v)
		shards[i][g] = s
	}
	for i, m := range shards {
		if m != nil {
			st.groups.shards[i].Store(&m)
		}
	}
	return st, owners
}
