package leasewatch

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"

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

// put applies a created or updated key and returns its kind label.
func (d decoder) put(s sink, kv *mvccpb.KeyValue) string {
	k := d.layout.Parse(string(kv.Key))
	if err := d.apply(s, k, kv); err != nil {
		d.log.Warn("skipping bad etcd value", "key", string(kv.Key), "revision", kv.ModRevision, "err", err)
		d.bad.WithLabelValues(kindName(k.Kind)).Inc()
	}
	return kindName(k.Kind)
}

func (d decoder) apply(s sink, k layout.Key, kv *mvccpb.KeyValue) error {
	switch k.Kind {
	case layout.KindBroker:
		b, err := decodeBroker(k, kv.Value)
		if err != nil {
			return err
		}
		s.SetBroker(b)
	case layout.KindTopic:
		tp, err := decodeTopic(k, kv.Value)
		if err != nil {
			return err
		}
		s.SetTopic(tp)
	case layout.KindOwner, layout.KindCoordinator:
		var o layout.Owner
		if err := layout.Unmarshal(kv.Value, &o); err != nil {
			return err
		}
		if o.Broker < 0 {
			return fmt.Errorf("negative broker id %d", o.Broker)
		}
		if k.Kind == layout.KindOwner {
			s.SetOwner(k.Topic, k.Partition, o.Broker)
		} else {
			s.SetCoordinator(k.Group, o.Broker)
		}
	case layout.KindEpoch, layout.KindCoordinatorEpoch:
		// The epoch is the key's version: each acquisition puts it once.
		if kv.Version <= 0 || kv.Version > math.MaxInt32 {
			return fmt.Errorf("epoch key version %d out of int32 range", kv.Version)
		}
		if k.Kind == layout.KindEpoch {
			s.SetEpoch(k.Topic, k.Partition, int32(kv.Version))
		} else {
			s.SetCoordinatorEpoch(k.Group, int32(kv.Version))
		}
	}
	// Other keys under the meta prefix are not routing's business.
	return nil
}

// delete applies a deleted key and returns its kind label.
func (d decoder) delete(s remover, kv *mvccpb.KeyValue) string {
	k := d.layout.Parse(string(kv.Key))
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

func decodeBroker(k layout.Key, value []byte) (routing.Broker, error) {
	var bi layout.BrokerInfo
	if err := layout.Unmarshal(value, &bi); err != nil {
		return routing.Broker{}, err
	}
	if bi.ID != k.Broker {
		return routing.Broker{}, fmt.Errorf("broker id %d in value differs from key", bi.ID)
	}
	if bi.Addr == "" {
		return routing.Broker{}, fmt.Errorf("broker %d has no address", bi.ID)
	}
	return routing.Broker{ID: bi.ID, Addr: bi.Addr, Rack: bi.Rack}, nil
}

func decodeTopic(k layout.Key, value []byte) (routing.Topic, error) {
	var ti layout.TopicInfo
	if err := layout.Unmarshal(value, &ti); err != nil {
		return routing.Topic{}, err
	}
	if ti.Name != k.Topic {
		return routing.Topic{}, fmt.Errorf("topic name %q in value differs from key", ti.Name)
	}
	if ti.Partitions < 0 || ti.Partitions > routing.MaxPartitions {
		return routing.Topic{}, fmt.Errorf("topic %s: partition count %d out of range", ti.Name, ti.Partitions)
	}
	tp := routing.Topic{Name: ti.Name, Partitions: ti.Partitions, Configs: ti.Configs}
	id, err := hex.DecodeString(ti.ID)
	if err != nil || len(id) != len(tp.ID) {
		return routing.Topic{}, fmt.Errorf("topic %s: id %q is not 32 hex digits", ti.Name, ti.ID)
	}
	copy(tp.ID[:], id)
	return tp, nil
}
