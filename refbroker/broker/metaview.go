package broker

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
)

// topicMeta is a topic as the meta prefix describes it.
type topicMeta struct {
	info layout.TopicInfo
	id   [16]byte
	rev  int64 // mod revision of the topic key
}

// metaView mirrors the meta prefix (brokers, topics, owners, epochs,
// coordinators) for Metadata, FindCoordinator and validation. It is a
// mirror.Handler.
type metaView struct {
	layout layout.Layout
	log    *slog.Logger

	mu           sync.RWMutex
	brokers      map[int32]layout.BrokerInfo
	seeds        []layout.Seeded // of brokers, for the rendezvous choice
	topics       map[string]*topicMeta
	topicIDs     map[[16]byte]string
	owners       map[partlog.TP]int32
	epochs       map[partlog.TP]int32
	coordinators map[string]int32
	rev          int64
	ready        chan struct{}
	changed      chan struct{} // closed and replaced on every Synced
}

func newMetaView(l layout.Layout, log *slog.Logger) *metaView {
	m := &metaView{layout: l, log: log, ready: make(chan struct{}), changed: make(chan struct{})}
	m.clearLocked()
	return m
}

func (m *metaView) clearLocked() {
	m.brokers = make(map[int32]layout.BrokerInfo)
	m.seeds = nil
	m.topics = make(map[string]*topicMeta)
	m.topicIDs = make(map[[16]byte]string)
	m.owners = make(map[partlog.TP]int32)
	m.epochs = make(map[partlog.TP]int32)
	m.coordinators = make(map[string]int32)
}

func (m *metaView) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clearLocked()
	for _, kv := range kvs {
		m.putLocked(kv)
	}
}

func (m *metaView) Put(kv *mvccpb.KeyValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(kv)
}

func (m *metaView) putLocked(kv *mvccpb.KeyValue) {
	meta, err := m.layout.Decode(kv.Key, kv.Value, kv.Version)
	if err != nil {
		m.log.Warn("bad value under meta prefix", "key", string(kv.Key), "err", err)
		return
	}
	k := meta.Key
	tp := partlog.TP{Topic: k.Topic, Partition: k.Partition}
	switch k.Kind {
	case layout.KindBroker:
		m.brokers[k.Broker] = meta.BrokerInfo
		m.seedBrokersLocked()
	case layout.KindTopic:
		t := &topicMeta{info: meta.TopicInfo, id: meta.TopicID, rev: kv.ModRevision}
		if old := m.topics[k.Topic]; old != nil {
			delete(m.topicIDs, old.id)
		}
		m.topics[k.Topic] = t
		m.topicIDs[t.id] = k.Topic
	case layout.KindOwner:
		m.owners[tp] = meta.Owner
	case layout.KindCoordinator:
		m.coordinators[k.Group] = meta.Owner
	case layout.KindEpoch:
		m.epochs[tp] = meta.Epoch
	}
}

// seedBrokersLocked rebuilds the rendezvous seeds after a membership change.
func (m *metaView) seedBrokersLocked() {
	m.seeds = m.seeds[:0]
	for id := range m.brokers {
		m.seeds = append(m.seeds, layout.Seed(id))
	}
}

func (m *metaView) Delete(kv *mvccpb.KeyValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.layout.Parse(string(kv.Key))
	tp := partlog.TP{Topic: k.Topic, Partition: k.Partition}
	switch k.Kind {
	case layout.KindBroker:
		delete(m.brokers, k.Broker)
		m.seedBrokersLocked()
	case layout.KindTopic:
		if t := m.topics[k.Topic]; t != nil {
			delete(m.topicIDs, t.id)
		}
		delete(m.topics, k.Topic)
	case layout.KindOwner:
		delete(m.owners, tp)
	case layout.KindEpoch:
		delete(m.epochs, tp)
	case layout.KindCoordinator:
		delete(m.coordinators, k.Group)
	}
}

func (m *metaView) Synced(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.ready:
	default:
		close(m.ready)
	}
	if rev > m.rev {
		m.rev = rev
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// changes returns a channel closed at the next watch response.
func (m *metaView) changes() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// atLeast returns a channel closed once the view is complete up to rev, and
// whether that is already so.
func (m *metaView) atLeast(rev int64) (<-chan struct{}, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed, m.rev >= rev
}

func (m *metaView) topic(name string) (topicMeta, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.topics[name]
	if t == nil {
		return topicMeta{}, false
	}
	return *t, true
}

func (m *metaView) topicByID(id [16]byte) (topicMeta, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	name, ok := m.topicIDs[id]
	if !ok {
		return topicMeta{}, false
	}
	return *m.topics[name], true
}

func (m *metaView) topicNames() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.topics))
}

// partitionExists reports whether tp names a partition of a known topic.
func (m *metaView) partitionExists(tp partlog.TP) bool {
	t, ok := m.topic(tp.Topic)
	return ok && tp.Partition >= 0 && tp.Partition < t.info.Partitions
}

// liveBrokers returns the registered brokers sorted by id.
func (m *metaView) liveBrokers() []layout.BrokerInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := slices.Collect(maps.Values(m.brokers))
	slices.SortFunc(out, func(a, b layout.BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// leader is the partition's owner, or for an unowned partition the live
// broker layout.Rendezvous picks (as every broker and every proxy does), or
// self when no broker is live.
func (m *metaView) leader(tp partlog.TP, self int32) (leader int32, epoch int32, owned bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	epoch = m.epochs[tp]
	if o, ok := m.owners[tp]; ok {
		return o, epoch, true
	}
	return m.rendezvousLocked(layout.PartitionKey(tp.Topic, tp.Partition), self), epoch, false
}

// coordinator is the group's coordinating broker, or the one that should be.
func (m *metaView) coordinator(group string, self int32) int32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if o, ok := m.coordinators[group]; ok {
		return o
	}
	return m.rendezvousLocked(layout.GroupKey(group), self)
}

func (m *metaView) epoch(tp partlog.TP) int32 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.epochs[tp]
}

func (m *metaView) rendezvousLocked(key uint64, self int32) int32 {
	if b, ok := layout.Rendezvous(key, m.seeds, nil); ok {
		return b
	}
	return self
}

// metaSyncWait bounds how long a request waits for the metadata view to
// catch up with etcd before it answers that a topic does not exist.
const metaSyncWait = 2 * time.Second

// knowsPartition reports whether tp exists, syncing the view with etcd
// first when it does not know tp (syncTopic): a partition request right
// after the topic's creation through another broker or a proxy must not be
// answered UNKNOWN_TOPIC_OR_PARTITION because this broker's watch lags.
func (b *Broker) knowsPartition(ctx context.Context, tp partlog.TP) bool {
	if b.meta.partitionExists(tp) {
		return true
	}
	return b.syncTopic(ctx, tp.Topic) == nil && b.meta.partitionExists(tp)
}

// syncTopic makes the metadata view at least as new as etcd's topic key
// for name, waiting up to metaSyncWait. The view is fed by a watch: a topic
// it does not know (or knows with fewer partitions) may just have been
// created through another broker or a proxy whose view is ahead, and only
// etcd may say that it does not exist. One linearizable read; no wait when
// the topic really is absent.
func (b *Broker) syncTopic(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, metaSyncWait)
	defer cancel()
	resp, err := b.cfg.Etcd.Get(ctx, b.cfg.Layout.TopicKey(name))
	if err != nil {
		return fmt.Errorf("read topic %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	want := resp.Kvs[0].ModRevision
	for {
		changed := b.meta.changes()
		if t, ok := b.meta.topic(name); ok && t.rev >= want {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("metadata view of topic %s at revision %d: %w", name, want, ctx.Err())
		}
	}
}
