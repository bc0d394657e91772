package routing

import "sync/atomic"

// Writes. The table has one writer (the watcher); mu only guards against
// misuse. Owner and epoch writes to a known partition are one atomic store.

// SetBroker adds or updates a live broker.
func (t *Table) SetBroker(b Broker) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st.Load()
	if old, ok := st.brokers.get(b.ID); ok && old == b {
		return
	}
	t.publish(st.brokers.with(b), st.topics)
}

// DeleteBroker marks a broker dead: its partitions stop counting as owned.
func (t *Table) DeleteBroker(id int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st.Load()
	if !st.brokers.live(id) {
		return
	}
	t.publish(st.brokers.without(id), st.topics)
}

// SetTopic adds or updates a topic. Owners and epochs already held for its
// partitions (received before the topic) become routable.
func (t *Table) SetTopic(tp Topic) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st.Load()
	n := clampPartitions(tp.Partitions)
	ref := st.topics[tp.Name]
	if ref == nil {
		ref = &topicRef{}
		ref.cur.Store(&topicEntry{info: tp, known: true, cells: make([]atomic.Uint64, n)})
		t.publish(st.brokers, withTopic(st.topics, tp.Name, ref))
		return
	}
	e := ref.cur.Load()
	cells := e.cells
	if n > len(cells) {
		cells = ref.grow(cells, n)
	}
	ref.cur.Store(&topicEntry{info: tp, known: true, cells: cells})
	t.changed()
}

// DeleteTopic forgets a topic's metadata. Owners and epochs still held for
// it are kept (their keys are deleted separately) but no longer routable
// through Topic.
func (t *Table) DeleteTopic(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st.Load()
	ref := st.topics[name]
	if ref == nil {
		return
	}
	if ref.used == 0 {
		t.publish(st.brokers, withTopic(st.topics, name, nil))
		return
	}
	ref.cur.Store(&topicEntry{info: Topic{Name: name}, cells: ref.cur.Load().cells})
	t.changed()
}

// SetOwner records the owner key of a partition. A negative broker means no
// owner.
func (t *Table) SetOwner(topic string, p, broker int32) {
	t.updatePartition(topic, p, func(v uint64) uint64 { return withOwner(v, max(broker, -1)) })
}

// DeleteOwner records that a partition's owner key is gone.
func (t *Table) DeleteOwner(topic string, p int32) {
	t.updatePartition(topic, p, func(v uint64) uint64 { return withOwner(v, -1) })
}

// SetEpoch records a partition's leader epoch; a negative epoch means
// unknown (its epoch key is gone).
func (t *Table) SetEpoch(topic string, p, epoch int32) {
	t.updatePartition(topic, p, func(v uint64) uint64 { return withEpoch(v, max(epoch, -1)) })
}

// SetOwnerAndEpoch records a partition's owner and leader epoch in one
// store, so that no reader sees the new owner with the old epoch (a layout
// whose owner key also carries the epoch, as KafScale's lease revision does).
func (t *Table) SetOwnerAndEpoch(topic string, p, broker, epoch int32) {
	t.updatePartition(topic, p, func(uint64) uint64 { return pack(max(broker, -1), max(epoch, -1)) })
}

// SetCoordinatorAndEpoch is SetOwnerAndEpoch for a group's coordinator.
func (t *Table) SetCoordinatorAndEpoch(group string, broker, epoch int32) {
	t.updateGroup(group, func(uint64) uint64 { return pack(max(broker, -1), max(epoch, -1)) })
}

// SetCoordinator records a group's coordinator key.
func (t *Table) SetCoordinator(group string, broker int32) {
	t.updateGroup(group, func(v uint64) uint64 { return withOwner(v, max(broker, -1)) })
}

// DeleteCoordinator records that a group's coordinator key is gone.
func (t *Table) DeleteCoordinator(group string) {
	t.updateGroup(group, func(v uint64) uint64 { return withOwner(v, -1) })
}

// SetCoordinatorEpoch records a group's coordinator epoch; negative means
// unknown.
func (t *Table) SetCoordinatorEpoch(group string, epoch int32) {
	t.updateGroup(group, func(v uint64) uint64 { return withEpoch(v, max(epoch, -1)) })
}

func (t *Table) updateGroup(group string, f func(uint64) uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, cur := t.st.Load().groups.update(group, f); old != cur {
		t.changed()
	}
}

// updatePartition applies f to one partition's ownership value, keeping values for partitions
// the table cannot route yet in the topic's overflow.
func (t *Table) updatePartition(topic string, p int32, f func(uint64) uint64) {
	if p < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st.Load()
	ref := st.topics[topic]
	if ref == nil {
		if f(0) == 0 {
			return
		}
		ref = &topicRef{}
		ref.cur.Store(&topicEntry{info: Topic{Name: topic}})
		t.publish(st.brokers, withTopic(st.topics, topic, ref))
		st = t.st.Load()
	}
	e := ref.cur.Load()
	var old, cur uint64
	if int64(p) < int64(len(e.cells)) {
		old = e.cells[p].Load()
		cur = f(old)
		e.cells[p].Store(cur)
	} else {
		old = ref.overflow[p]
		cur = f(old)
		ref.setOverflow(p, cur)
	}
	if old == cur {
		return
	}
	t.account(ref, old, cur)
	if ref.used == 0 && !e.known {
		t.publish(st.brokers, withTopic(st.topics, topic, nil))
		return
	}
	t.changed()
}

// account keeps the used and owner counts in step with one cell change.
func (t *Table) account(ref *topicRef, old, cur uint64) {
	switch {
	case old == 0 && cur != 0:
		ref.used++
	case old != 0 && cur == 0:
		ref.used--
	}
	oo, _ := unpack(old)
	co, _ := unpack(cur)
	switch {
	case oo < 0 && co >= 0:
		t.owners.Add(1)
	case oo >= 0 && co < 0:
		t.owners.Add(-1)
	}
}

func (ref *topicRef) setOverflow(p int32, v uint64) {
	if v == 0 {
		delete(ref.overflow, p)
		return
	}
	if ref.overflow == nil {
		ref.overflow = map[int32]uint64{}
	}
	ref.overflow[p] = v
}

// grow returns n cells holding the values of old and of the overflow entries
// that now fit. Readers keep using old until the new entry is published; no
// one else writes old meanwhile (single writer).
func (ref *topicRef) grow(old []atomic.Uint64, n int) []atomic.Uint64 {
	cells := make([]atomic.Uint64, n)
	for i := range old {
		cells[i].Store(old[i].Load())
	}
	for p, v := range ref.overflow {
		if int64(p) < int64(n) {
			cells[p].Store(v)
			delete(ref.overflow, p)
		}
	}
	return cells
}

func clampPartitions(n int32) int {
	return int(min(max(n, 0), MaxPartitions))
}

// publish installs a new state with the given brokers and topics; writers
// only, mu held.
func (t *Table) publish(b *brokerSet, topics map[string]*topicRef) {
	t.st.Store(&state{brokers: b, topics: topics, groups: t.st.Load().groups})
	t.changed()
}

// withTopic returns a copy of m with name set to ref (removed if ref is nil).
func withTopic(m map[string]*topicRef, name string, ref *topicRef) map[string]*topicRef {
	n := make(map[string]*topicRef, len(m)+1)
	for k, v := range m {
		n[k] = v
	}
	if ref == nil {
		delete(n, name)
	} else {
		n[name] = ref
	}
	return n
}
