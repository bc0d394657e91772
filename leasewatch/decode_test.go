package leasewatch

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/routing"
)

func newDecoder(l layout.Layout) decoder {
	return decoder{layout: l, log: slog.New(slog.DiscardHandler), bad: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bad"}, []string{"kind"})}
}

const topicID = "0102030405060708090a0b0c0d0e0f10"

func TestDecodePut(t *testing.T) {
	l := layout.New("/x")
	topicVal := func(name string, n int32, id string) string {
		return layout.Marshal(layout.TopicInfo{Name: name, ID: id, Partitions: n})
	}
	type check func(t *testing.T, tb *routing.Table)
	cases := []struct {
		name    string
		key     string
		value   string
		version int64
		kind    string
		bad     bool
		check   check
	}{
		{"broker", l.BrokerKey(3), layout.Marshal(layout.BrokerInfo{ID: 3, Addr: "h:1", Rack: "r"}), 1, "broker", false,
			func(t *testing.T, tb *routing.Table) {
				if b, ok := tb.Broker(3); !ok || b != (routing.Broker{ID: 3, Addr: "h:1", Rack: "r"}) {
					t.Fatalf("Broker(3) = %+v, %v", b, ok)
				}
			}},
		{"broker id differs from key", l.BrokerKey(3), layout.Marshal(layout.BrokerInfo{ID: 4, Addr: "h:1"}), 1, "broker", true, noBrokers},
		{"broker without address", l.BrokerKey(3), layout.Marshal(layout.BrokerInfo{ID: 3}), 1, "broker", true, noBrokers},
		{"broker bad json", l.BrokerKey(3), "{", 1, "broker", true, noBrokers},
		{"topic", l.TopicKey("t"), topicVal("t", 3, topicID), 1, "topic", false,
			func(t *testing.T, tb *routing.Table) {
				tp, ok := tb.Topic("t")
				if !ok || tp.Partitions != 3 || tp.ID != [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} {
					t.Fatalf("Topic(t) = %+v, %v", tp, ok)
				}
			}},
		{"topic bad id", l.TopicKey("t"), topicVal("t", 3, "xyz"), 1, "topic", true, noTopics},
		{"topic short id", l.TopicKey("t"), topicVal("t", 3, "0102"), 1, "topic", true, noTopics},
		{"topic negative partitions", l.TopicKey("t"), topicVal("t", -1, topicID), 1, "topic", true, noTopics},
		{"topic too many partitions", l.TopicKey("t"), topicVal("t", routing.MaxPartitions+1, topicID), 1, "topic", true, noTopics},
		{"topic name differs from key", l.TopicKey("t"), topicVal("u", 3, topicID), 1, "topic", true, noTopics},
		{"owner", l.OwnerKey("t", 2), layout.Marshal(layout.Owner{Broker: 5}), 1, "owner", false,
			func(t *testing.T, tb *routing.Table) {
				tb.SetTopic(routing.Topic{Name: "t", Partitions: 3}) // owners may come first
				if o, _, _ := tb.Owner("t", 2); o != 5 || tb.Len() != 1 {
					t.Fatalf("Owner(t,2) = %d, Len %d", o, tb.Len())
				}
			}},
		{"owner negative broker", l.OwnerKey("t", 2), layout.Marshal(layout.Owner{Broker: -2}), 1, "owner", true, noOwners},
		{"owner bad json", l.OwnerKey("t", 2), "nope", 1, "owner", true, noOwners},
		{"epoch is the version", l.EpochKey("t", 1), "", 7, "epoch", false,
			func(t *testing.T, tb *routing.Table) {
				tb.SetTopic(routing.Topic{Name: "t", Partitions: 3})
				if e := tb.Epoch("t", 1); e != 7 {
					t.Fatalf("Epoch = %d, want 7", e)
				}
			}},
		{"epoch version overflows int32", l.EpochKey("t", 1), "", 1 << 40, "epoch", true, noOwners},
		{"coordinator", l.CoordinatorKey("g"), layout.Marshal(layout.Owner{Broker: 2}), 1, "coordinator", false,
			func(t *testing.T, tb *routing.Table) {
				if c, _ := tb.Coordinator("g"); c != 2 {
					t.Fatalf("Coordinator = %d", c)
				}
			}},
		{"coordinator epoch", l.CoordinatorEpochKey("g"), "", 4, "coordinator_epoch", false,
			func(t *testing.T, tb *routing.Table) {
				if e := tb.CoordinatorEpoch("g"); e != 4 {
					t.Fatalf("CoordinatorEpoch = %d", e)
				}
			}},
		{"unknown meta key", l.MetaPrefix() + "future/thing", "{}", 1, "other", false, noOwners},
		{"owner key without partition", l.MetaPrefix() + "owners/t", "{}", 1, "other", false, noOwners},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(l)
			tb := routing.NewTable()
			kind := d.put(tb, &mvccpb.KeyValue{Key: []byte(tc.key), Value: []byte(tc.value), Version: tc.version})
			if kind != tc.kind {
				t.Fatalf("kind = %q, want %q", kind, tc.kind)
			}
			bad := testutil.ToFloat64(d.bad.WithLabelValues(tc.kind))
			if (bad == 1) != tc.bad {
				t.Fatalf("bad-value count = %v, want bad=%v", bad, tc.bad)
			}
			tc.check(t, tb)
			// The builder path decodes the same way.
			b := routing.NewBuilder()
			d.put(b, &mvccpb.KeyValue{Key: []byte(tc.key), Value: []byte(tc.value), Version: tc.version})
			tb2 := routing.NewTable()
			tb2.Replace(b)
			tc.check(t, tb2)
		})
	}
}

func noBrokers(t *testing.T, tb *routing.Table) {
	if n := len(tb.Brokers()); n != 0 {
		t.Fatalf("%d brokers after a bad value", n)
	}
}

func noTopics(t *testing.T, tb *routing.Table) {
	if n := len(tb.Topics()); n != 0 {
		t.Fatalf("%d topics after a bad value", n)
	}
}

func noOwners(t *testing.T, tb *routing.Table) {
	tb.SetTopic(routing.Topic{Name: "t", Partitions: 3}) // reveal held owners and epochs
	for _, p := range tb.Snapshot().Partitions {
		if p.Owner != -1 || p.Epoch != -1 {
			t.Fatalf("table changed by a bad or foreign value: %+v", p)
		}
	}
	if tb.Len() != 0 {
		t.Fatalf("Len = %d after a bad or foreign value", tb.Len())
	}
}

func TestDecodeDelete(t *testing.T) {
	l := layout.New("")
	d := newDecoder(l)
	tb := routing.NewTable()
	tb.SetBroker(routing.Broker{ID: 1, Addr: "a"})
	tb.SetTopic(routing.Topic{Name: "t", Partitions: 2})
	tb.SetOwner("t", 0, 1)
	tb.SetEpoch("t", 0, 3)
	tb.SetCoordinator("g", 1)
	tb.SetCoordinatorEpoch("g", 2)
	for _, c := range []struct{ key, kind string }{
		{l.OwnerKey("t", 0), "owner"},
		{l.EpochKey("t", 0), "epoch"},
		{l.CoordinatorKey("g"), "coordinator"},
		{l.CoordinatorEpochKey("g"), "coordinator_epoch"},
		{l.TopicKey("t"), "topic"},
		{l.BrokerKey(1), "broker"},
		{l.MetaPrefix() + "zzz/1", "other"},
	} {
		if kind := d.delete(tb, &mvccpb.KeyValue{Key: []byte(c.key)}); kind != c.kind {
			t.Fatalf("delete %s: kind %q, want %q", c.key, kind, c.kind)
		}
	}
	s := tb.Snapshot()
	if tb.Len() != 0 || len(s.Brokers) != 0 || len(s.Topics) != 0 || len(s.Groups) != 0 || tb.Epoch("t", 0) != -1 {
		t.Fatalf("table not empty after deleting every key: %+v", s)
	}
}
