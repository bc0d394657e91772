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
		{"state", l.PartitionStateKey("orders", 3), Key{Kind: KindPartitionState, Topic: "orders", Partition: 3}},
		{"segment", l.SegmentKey("orders", 3, 1234), Key{Kind: KindSegment, Topic: "orders", Partition: 3, Base: 1234}},
		{"other prefix", "/other/meta/topics/x", Key{}},
		{"bad broker id", l.MetaPrefix() + "brokers/x", Key{}},
		{"negative partition", l.MetaPrefix() + "owners/t/-1", Key{}},
		{"empty name", l.MetaPrefix() + "topics/", Key{}},
		{"unknown meta kind", l.MetaPrefix() + "whatever/x", Key{}},
		{"bad log key", l.LogPrefix() + "t/0/nope", Key{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.Parse(tt.key); got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func TestSegmentKeysSortByOffset(t *testing.T) {
	l := New("")
	if a, b := l.SegmentKey("t", 0, 9), l.SegmentKey("t", 0, 10); a >= b {
		t.Fatalf("segment keys do not sort by offset: %q >= %q", a, b)
	}
}

func TestMetaExcludesPerCommitKeys(t *testing.T) {
	l := New("")
	for _, k := range []string{l.PartitionStateKey("t", 0), l.SegmentKey("t", 0, 0), l.GroupStateKey("g")} {
		if len(k) >= len(l.MetaPrefix()) && k[:len(l.MetaPrefix())] == l.MetaPrefix() {
			t.Fatalf("%q is under the meta prefix: proxies would get an event per commit", k)
		}
	}
}
