package kafscale

import (
	"crypto/sha1"
	"math"
	"testing"

	"github.com/kproxy/kproxy/leasewatch/kafscale/kafscaletest"
	"github.com/kproxy/kproxy/routing"
)

func TestParseKey(t *testing.T) {
	k := newKeys("/kafscale/") // a trailing slash is the same root
	cases := []struct {
		key     string
		want    key
		wantErr bool
	}{
		{"/kafscale/partition-leases/orders/3", key{kind: kindPartition, topic: "orders", part: 3}, false},
		{"/kafscale/partition-leases/a.b_c-d/0", key{kind: kindPartition, topic: "a.b_c-d", part: 0}, false},
		{"/kafscale/partition-leases/orders/x", key{kind: kindPartition}, true},
		{"/kafscale/partition-leases/orders/-1", key{kind: kindPartition}, true},
		{"/kafscale/partition-leases/orders", key{kind: kindPartition}, true},
		{"/kafscale/group-leases/team/a", key{kind: kindGroup, group: "team/a"}, false},
		{"/kafscale/group-leases/", key{kind: kindGroup}, true},
		{"/kafscale/metadata/snapshot", key{kind: kindSnapshot}, false},
		{"/kafscale/topics/orders/partitions/0/next_offset", key{}, false},
		{"/kafscale/consumers/g/offsets/orders/0", key{}, false},
		{"/kafscalex/metadata/snapshot", key{}, false},
	}
	for _, c := range cases {
		got, err := k.parse(c.key)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v (error %v)", c.key, got, err, c.want, c.wantErr)
		}
	}
}

func TestParseOwner(t *testing.T) {
	cases := []struct {
		v    string
		want int32
		ok   bool
	}{
		{"1", 1, true}, {"0", 0, true}, {" 12\n", 12, true},
		{`{"broker":1}`, -1, false}, {"-1", -1, false}, {"", -1, false}, {"4294967296", -1, false},
	}
	for _, c := range cases {
		got, err := parseOwner([]byte(c.v))
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("parseOwner(%q) = %d, %v; want %d (ok %v)", c.v, got, err, c.want, c.ok)
		}
	}
}

func TestEpochOf(t *testing.T) {
	for rev, want := range map[int64]int32{0: 0, 7: 7, math.MaxInt32: math.MaxInt32, math.MaxInt32 + 5: math.MaxInt32, -3: 0} {
		if got := epochOf(rev); got != want {
			t.Errorf("epochOf(%d) = %d, want %d", rev, got, want)
		}
	}
}

func TestTopicIDIsSHA1Prefix(t *testing.T) {
	sum := sha1.Sum([]byte("orders"))
	if id := TopicID("orders"); string(id[:]) != string(sum[:16]) {
		t.Fatalf("TopicID = %x, want %x", id, sum[:16])
	}
}

func TestDecodeSnapshot(t *testing.T) {
	rack := "az1"
	id := TopicID("orders")
	cases := []struct {
		name        string
		json        []byte
		wantBrokers map[int32]routing.Broker
		wantTopics  map[string]routing.Topic
		wantSkipped int
		wantErr     bool
	}{{
		name: "as KafScale writes it",
		json: kafscaletest.SnapshotJSON(
			[]kafscaletest.Addr{{ID: 0, Host: "b0", Port: 9092}, {ID: 1, Host: "b1", Port: 9093, Rack: &rack}},
			[]kafscaletest.Topic{{Name: "orders", ID: id, Partitions: 3}}),
		wantBrokers: map[int32]routing.Broker{0: {ID: 0, Addr: "b0:9092"}, 1: {ID: 1, Addr: "b1:9093", Rack: "az1"}},
		wantTopics:  map[string]routing.Topic{"orders": {Name: "orders", ID: id, Partitions: 3}},
	}, {
		name:        "literal document with null rack and ipv6 host",
		json:        []byte(`{"Brokers":[{"NodeID":2,"Host":"::1","Port":9092,"Rack":null}],"ControllerID":2,"Topics":[{"Topic":"t","TopicID":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"Partitions":[{"Partition":0,"Leader":2,"LeaderEpoch":0}]}],"ClusterID":"c"}`),
		wantBrokers: map[int32]routing.Broker{2: {ID: 2, Addr: "[::1]:9092"}},
		wantTopics:  map[string]routing.Topic{"t": {Name: "t", ID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partitions: 1}},
	}, {
		name:        "no topic id: KafScale's rule; sparse partitions",
		json:        []byte(`{"Brokers":[],"Topics":[{"Topic":"orders","Partitions":[{"Partition":0},{"Partition":4}]}]}`),
		wantBrokers: map[int32]routing.Broker{},
		wantTopics:  map[string]routing.Topic{"orders": {Name: "orders", ID: id, Partitions: 5}},
	}, {
		name:        "bad entries skipped",
		json:        []byte(`{"Brokers":[{"NodeID":-1,"Host":"x","Port":1},{"NodeID":1,"Host":"","Port":1},{"NodeID":2,"Host":"h","Port":70000},{"NodeID":3,"Host":"h","Port":1},{"NodeID":3,"Host":"dup","Port":2}],"Topics":[{"Topic":null},{"Topic":""}]}`),
		wantBrokers: map[int32]routing.Broker{3: {ID: 3, Addr: "h:1"}},
		wantTopics:  map[string]routing.Topic{},
		wantSkipped: 6,
	}, {
		name:    "not JSON",
		json:    []byte("\x08\x01protobuf"),
		wantErr: true,
	}, {
		name:    "wrong shape",
		json:    []byte(`{"Brokers":{"NodeID":1}}`),
		wantErr: true,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, skipped, err := decodeSnapshot(c.json)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if len(skipped) != c.wantSkipped {
				t.Errorf("skipped %d (%v), want %d", len(skipped), skipped, c.wantSkipped)
			}
			if len(s.brokers) != len(c.wantBrokers) {
				t.Errorf("brokers = %v, want %v", s.brokers, c.wantBrokers)
			}
			for id, b := range c.wantBrokers {
				if s.brokers[id] != b {
					t.Errorf("broker %d = %+v, want %+v", id, s.brokers[id], b)
				}
			}
			if len(s.topics) != len(c.wantTopics) {
				t.Errorf("topics = %v, want %v", s.topics, c.wantTopics)
			}
			for name, tp := range c.wantTopics {
				got := s.topics[name]
				if got.Name != tp.Name || got.ID != tp.ID || got.Partitions != tp.Partitions {
					t.Errorf("topic %s = %+v, want %+v", name, got, tp)
				}
			}
		})
	}
}
