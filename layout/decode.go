package layout

import (
	"encoding/hex"
	"fmt"
	"math"
)

// MaxPartitions bounds the partition count a topic value may give, so that
// a corrupt value cannot make a reader allocate without limit.
const MaxPartitions = 1 << 20

// Meta is a decoded key under MetaPrefix. Only the fields its kind uses are
// set.
type Meta struct {
	Key        Key
	BrokerInfo BrokerInfo // KindBroker
	TopicInfo  TopicInfo  // KindTopic
	TopicID    [16]byte   // KindTopic: TopicInfo.ID decoded
	Owner      int32      // KindOwner, KindCoordinator: the holding broker
	Epoch      int32      // KindEpoch, KindCoordinatorEpoch
}

// Decode reads a created or updated key under MetaPrefix: key and value as
// etcd returned them, version the key's version (the epoch of an epoch key).
// A key that is not a meta key gives KindUnknown and no error. A value that
// breaks the contract gives an error naming what is wrong; readers skip such
// keys rather than stop, so one corrupt key cannot stop routing. Deletes
// need no value: use Parse.
func (l Layout) Decode(key, value []byte, version int64) (Meta, error) {
	m := Meta{Key: l.Parse(string(key))}
	var err error
	switch m.Key.Kind {
	case KindBroker:
		m.BrokerInfo, err = decodeBroker(m.Key, value)
	case KindTopic:
		m.TopicInfo, m.TopicID, err = decodeTopic(m.Key, value)
	case KindOwner, KindCoordinator:
		m.Owner, err = DecodeOwner(value)
	case KindEpoch, KindCoordinatorEpoch:
		// The epoch is the key's version: each acquisition puts it once.
		if version <= 0 || version > math.MaxInt32 {
			err = fmt.Errorf("epoch key version %d out of int32 range", version)
		}
		m.Epoch = int32(version)
	}
	if err != nil {
		return Meta{Key: m.Key}, err
	}
	return m, nil
}

func decodeBroker(k Key, value []byte) (BrokerInfo, error) {
	var bi BrokerInfo
	if err := Unmarshal(value, &bi); err != nil {
		return BrokerInfo{}, err
	}
	if bi.ID != k.Broker {
		return BrokerInfo{}, fmt.Errorf("broker id %d in value differs from key", bi.ID)
	}
	if bi.Addr == "" {
		return BrokerInfo{}, fmt.Errorf("broker %d has no address", bi.ID)
	}
	return bi, nil
}

func decodeTopic(k Key, value []byte) (TopicInfo, [16]byte, error) {
	var ti TopicInfo
	var id [16]byte
	if err := Unmarshal(value, &ti); err != nil {
		return TopicInfo{}, id, err
	}
	if ti.Name != k.Topic {
		return TopicInfo{}, id, fmt.Errorf("topic name %q in value differs from key", ti.Name)
	}
	if ti.Partitions < 0 || ti.Partitions > MaxPartitions {
		return TopicInfo{}, id, fmt.Errorf("topic %s: partition count %d out of range", ti.Name, ti.Partitions)
	}
	raw, err := hex.DecodeString(ti.ID)
	if err != nil || len(raw) != len(id) {
		return TopicInfo{}, id, fmt.Errorf("topic %s: id %q is not 32 hex digits", ti.Name, ti.ID)
	}
	copy(id[:], raw)
	return ti, id, nil
}

// DecodeOwner reads the value of an OwnerKey or CoordinatorKey: the broker
// that holds it. Decode uses it; so does the lease kit, for an owner key it
// found taken.
func DecodeOwner(value []byte) (int32, error) {
	var o Owner
	if err := Unmarshal(value, &o); err != nil {
		return 0, err
	}
	if o.Broker < 0 {
		return 0, fmt.Errorf("negative broker id %d", o.Broker)
	}
	return o.Broker, nil
}
