package leasewatch

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/routing"
)

// sink is what a decoded key is applied to: the live table for watch events,
// a Builder for a full listing.
type sink interface {
	SetBroker(routing.Broker)
	SetTopic(routing.Topic)
	SetOwner(topic string, p, broker int32)
	SetEpoch(topic string, p, epoch int32)
	SetCoordinator(group string, broker int32)
	SetCoordinatorEpoch(group string, epoch int32)
}

// remover is the delete side, which only the live table has (a listing
// holds no deletes).
type remover interface {
	sink
	DeleteBroker(id int32)
	DeleteTopic(name string)
	DeleteOwner(topic string, p int32)
	DeleteCoordinator(group string)
}

var _ remover = (*routing.Table)(nil)
var _ sink = (*routing.Builder)(nil)

// decoder turns meta keys into table changes. Bad values are logged,
// counted and skipped: a corrupt key must not stop routing.
type decoder struct {
	layout layout.Layout
	log    *slog.Logger
	bad    *prometheus.CounterVec
	// events, if not nil, counts each key by kind before it is applied,
	// so that whoever sees the change in the table also sees it counted.
	events *prometheus.CounterVec
}

// count counts one key of kind k in d.events.
func (d decoder) count(k layout.Kind) {
	if d.events != nil {
		d.events.WithLabelValues(kindName(k)).Inc()
	}
}

// kindName is the metric label of a key kind.
func kindName(k layout.Kind) string {
	switch k {
	case layout.KindBroker:
		return "broker"
	case layout.KindTopic:
		return "topic"
	case layout.KindOwner:
		return "owner"
	case layout.KindEpoch:
		return "epoch"
	case layout.KindCoordinator:
		return "coordinator"
	case layout.KindCoordinatorEpoch:
		return "coordinator_epoch"
	}
	return "other"
}

// put counts and applies a created or updated key and returns its kind
// label.
func (d decoder) put(s sink, kv *mvccpb.KeyValue) string {
	m, err := d.layout.Decode(kv.Key, kv.Value, kv.Version)
	d.count(m.Key.Kind)
	if err != nil {
		d.log.Warn("skipping bad etcd value", "key", string(kv.Key), "revision", kv.ModRevision, "err", err)
		d.bad.WithLabelValues(kindName(m.Key.Kind)).Inc()
		return kindName(m.Key.Kind)
	}
	apply(s, m)
	return kindName(m.Key.Kind)
}

func apply(s sink, m layout.Meta) {
	k := m.Key
	switch k.Kind {
	case layout.KindBroker:
		s.SetBroker(routing.Broker{ID: m.BrokerInfo.ID, Addr: m.BrokerInfo.Addr, Rack: m.BrokerInfo.Rack})
	case layout.KindTopic:
		ti := m.TopicInfo
		s.SetTopic(routing.Topic{Name: ti.Name, ID: m.TopicID, Partitions: ti.Partitions, Configs: ti.Configs})
	case layout.KindOwner:
		s.SetOwner(k.Topic, k.Partition, m.Owner)
	case layout.KindCoordinator:
		s.SetCoordinator(k.Group, m.Owner)
	case layout.KindEpoch:
		s.SetEpoch(k.Topic, k.Partition, m.Epoch)
	case layout.KindCoordinatorEpoch:
		s.SetCoordinatorEpoch(k.Group, m.Epoch)
	}
	// Other keys under the meta prefix are not routing's business.
}

// delete counts and applies a deleted key and returns its kind label.
func (d decoder) delete(s remover, kv *mvccpb.KeyValue) string {
	k := d.layout.Parse(string(kv.Key))
	d.count(k.Kind)
	switch k.Kind {
	case layout.KindBroker:
		s.DeleteBroker(k.Broker)
	case layout.KindTopic:
		s.DeleteTopic(k.Topic)
	case layout.KindOwner:
		s.DeleteOwner(k.Topic, k.Partition)
	case layout.KindEpoch:
		s.SetEpoch(k.Topic, k.Partition, -1)
	case layout.KindCoordinator:
		s.DeleteCoordinator(k.Group)
	case layout.KindCoordinatorEpoch:
		s.SetCoordinatorEpoch(k.Group, -1)
	}
	return kindName(k.Kind)
}
