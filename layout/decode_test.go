package layout

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	l := New("/d")
	const id = "0102030405060708090a0b0c0d0e0f10"
	topic := func(name string, n int32, id string) string {
		return Marshal(TopicInfo{Name: name, ID: id, Partitions: n})
	}
	tests := []struct {
		name    string
		key     string
		value   string
		version int64
		want    Meta
		err     string // substring of the error; "" means none
	}{
		{"broker", l.BrokerKey(3), Marshal(BrokerInfo{ID: 3, Addr: "h:1"}), 1,
			Meta{Key: Key{Kind: KindBroker, Broker: 3}, BrokerInfo: BrokerInfo{ID: 3, Addr: "h:1"}}, ""},
		{"broker id differs", l.BrokerKey(3), Marshal(BrokerInfo{ID: 4, Addr: "h:1"}), 1, Meta{Key: Key{Kind: KindBroker, Broker: 3}}, "differs"},
		{"broker without address", l.BrokerKey(3), Marshal(BrokerInfo{ID: 3}), 1, Meta{Key: Key{Kind: KindBroker, Broker: 3}}, "no address"},
		{"topic", l.TopicKey("t"), topic("t", 2, id), 1,
			Meta{Key: Key{Kind: KindTopic, Topic: "t"}, TopicInfo: TopicInfo{Name: "t", ID: id, Partitions: 2},
				TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}, ""},
		{"topic short id", l.TopicKey("t"), topic("t", 2, "0102"), 1, Meta{Key: Key{Kind: KindTopic, Topic: "t"}}, "32 hex"},
		{"topic too many partitions", l.TopicKey("t"), topic("t", MaxPartitions+1, id), 1, Meta{Key: Key{Kind: KindTopic, Topic: "t"}}, "out of range"},
		{"topic name differs", l.TopicKey("t"), topic("u", 2, id), 1, Meta{Key: Key{Kind: KindTopic, Topic: "t"}}, "differs"},
		{"owner", l.OwnerKey("t", 1), Marshal(Owner{Broker: 2}), 1, Meta{Key: Key{Kind: KindOwner, Topic: "t", Partition: 1}, Owner: 2}, ""},
		{"owner negative", l.OwnerKey("t", 1), Marshal(Owner{Broker: -1}), 1, Meta{Key: Key{Kind: KindOwner, Topic: "t", Partition: 1}}, "negative"},
		{"coordinator bad json", l.CoordinatorKey("g"), "{", 1, Meta{Key: Key{Kind: KindCoordinator, Group: "g"}}, "decode"},
		{"epoch", l.EpochKey("t", 1), "", 5, Meta{Key: Key{Kind: KindEpoch, Topic: "t", Partition: 1}, Epoch: 5}, ""},
		{"coordinator epoch zero version", l.CoordinatorEpochKey("g"), "", 0, Meta{Key: Key{Kind: KindCoordinatorEpoch, Group: "g"}}, "out of int32"},
		{"not a meta key", "/d/elsewhere/x", "{", 1, Meta{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.Decode([]byte(tt.key), []byte(tt.value), tt.version)
			if (err != nil) != (tt.err != "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
			if got.Key != tt.want.Key || got.BrokerInfo != tt.want.BrokerInfo || got.TopicID != tt.want.TopicID ||
				got.TopicInfo.Name != tt.want.TopicInfo.Name || got.TopicInfo.Partitions != tt.want.TopicInfo.Partitions ||
				got.Owner != tt.want.Owner || got.Epoch != tt.want.Epoch {
				t.Fatalf("Decode = %+v, want %+v", got, tt.want)
			}
		})
	}
}
