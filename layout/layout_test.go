package layout

import "testing"

func TestParseRoundTrip(t *testing.T) {
	l := New("/kp/")
	tests := []struct {
		name string
		key  string
		want Key
	}{
		{"broker", l.BrokerKey(7), Key{Kind: KindBroker, Broker: 7}},
		{"topic", l.TopicKey("orders.v1"), Key{Kind: KindTopic, Topic: "orders.v1"}},
		{"owner", l.OwnerKey("orders", 12), Key{Kind: KindOwner, Topic: "orders", Partition: 12}},
		{"epoch", l.EpochKey("orders", 0), Key{Kind: KindEpoch, Topic: "orders", Partition: 0}},
		{"coordinator with slash", l.CoordinatorKey("team/app"), Key{Kind: KindCoordinator, Group: "team/app"}},
		{"coordinator epoch", l.CoordinatorEpochKey("g"), Key{Kind: KindCoordinatorEpoch, Group: "g"}},
		{"other prefix", "/other/meta/topics/x", Key{}},
		{"bad broker id", l.MetaPrefix() + "brokers/x", Key{}},
		{"negative partition", l.MetaPrefix() + "owners/t/-1", Key{}},
		{"empty name", l.MetaPrefix() + "topics/", Key{}},
		{"unknown meta kind", l.MetaPrefix() + "whatever/x", Key{}},
		{"outside the meta prefix", l.Prefix() + "/log/t/0/state", Key{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.Parse(tt.key); got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}
