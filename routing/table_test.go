package routing

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/kproxy/kproxy/layout"
)

func topic(name string, n int32) Topic {
	return Topic{Name: name, ID: [16]byte{1, 2, 3}, Partitions: n, Configs: map[string]string{"cleanup.policy": "delete"}}
}

// step is one write applied to a table in a table-driven test.
type step func(t *Table)

func TestOwnerRouteSemantics(t *testing.T) {
	b1, b2, b3 := Broker{ID: 1, Addr: "h1:9092"}, Broker{ID: 2, Addr: "h2:9092"}, Broker{ID: 3, Addr: "h3:9092"}
	base := []step{
		func(t *Table) { t.SetBroker(b1); t.SetBroker(b2); t.SetBroker(b3) },
		func(t *Table) { t.SetTopic(topic("a", 4)) },
	}
	type want struct {
		owner, epoch int32
		owned        bool
		route        int32 // Route(avoid=-1); -2 means "the rendezvous choice"
	}
	cases := []struct {
		name  string
		steps []step
		p     int32
		want  want
	}{
		{"no owner key", nil, 0, want{-1, -1, false, -2}},
		{"live owner", []step{func(t *Table) { t.SetOwner("a", 0, 2) }}, 0, want{2, -1, true, 2}},
		{"owner and epoch", []step{func(t *Table) { t.SetOwner("a", 1, 3); t.SetEpoch("a", 1, 7) }}, 1, want{3, 7, true, 3}},
		{"epoch without owner", []step{func(t *Table) { t.SetEpoch("a", 1, 7) }}, 1, want{-1, 7, false, -2}},
		{"owner deleted, epoch kept", []step{func(t *Table) { t.SetOwner("a", 1, 3); t.SetEpoch("a", 1, 7); t.DeleteOwner("a", 1) }}, 1, want{-1, 7, false, -2}},
		{"epoch deleted", []step{func(t *Table) { t.SetEpoch("a", 1, 7); t.SetEpoch("a", 1, -1) }}, 1, want{-1, -1, false, -2}},
		{"owner not live", []step{func(t *Table) { t.SetOwner("a", 2, 9) }}, 2, want{9, -1, false, -2}},
		{"owner's broker died", []step{func(t *Table) { t.SetOwner("a", 2, 1); t.DeleteBroker(1) }}, 2, want{1, -1, false, -2}},
		{"owner's broker came back", []step{func(t *Table) { t.SetOwner("a", 2, 1); t.DeleteBroker(1); t.SetBroker(b1) }}, 2, want{1, -1, true, 1}},
		{"owner moved", []step{func(t *Table) {
			t.SetOwner("a", 3, 1)
			t.SetEpoch("a", 3, 1)
			t.SetOwner("a", 3, 2)
			t.SetEpoch("a", 3, 2)
		}}, 3, want{2, 2, true, 2}},
		{"negative partition", []step{func(t *Table) { t.SetOwner("a", -1, 1) }}, -1, want{-1, -1, false, -2}},
		{"partition beyond count", []step{func(t *Table) { t.SetOwner("a", 9, 1) }}, 9, want{-1, -1, false, -2}},
		{"partition beyond count, then topic grows", []step{func(t *Table) { t.SetOwner("a", 9, 1); t.SetEpoch("a", 9, 4); t.SetTopic(topic("a", 10)) }}, 9, want{1, 4, true, 1}},
		{"negative owner means none", []step{func(t *Table) { t.SetOwner("a", 0, 2); t.SetOwner("a", 0, -5) }}, 0, want{-1, -1, false, -2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewTable()
			for _, s := range append(append([]step{}, base...), tc.steps...) {
				s(tb)
			}
			o, e, owned := tb.Owner("a", tc.p)
			if o != tc.want.owner || e != tc.want.epoch || owned != tc.want.owned {
				t.Fatalf("Owner = (%d, %d, %v), want (%d, %d, %v)", o, e, owned, tc.want.owner, tc.want.epoch, tc.want.owned)
			}
			if got := tb.Epoch("a", tc.p); got != tc.want.epoch {
				t.Fatalf("Epoch = %d, want %d", got, tc.want.epoch)
			}
			wantRoute := tc.want.route
			if wantRoute == -2 {
				wantRoute, _ = tb.st.Load().brokers.rendezvous(layout.PartitionKey("a", tc.p), Avoid{})
			}
			if r, ok := tb.Route("a", tc.p, -1); !ok || r != wantRoute {
				t.Fatalf("Route = (%d, %v), want (%d, true)", r, ok, wantRoute)
			}
		})
	}
}

func TestRouteAvoid(t *testing.T) {
	tb := NewTable()
	tb.SetTopic(topic("a", 1))
	if _, ok := tb.Route("a", 0, -1); ok {
		t.Fatal("Route with no brokers succeeded")
	}
	tb.SetBroker(Broker{ID: 1, Addr: "h1"})
	tb.SetOwner("a", 0, 1)
	if r, ok := tb.Route("a", 0, -1); !ok || r != 1 {
		t.Fatalf("Route = (%d, %v), want (1, true)", r, ok)
	}
	// Avoiding is a preference: the only live broker is still tried.
	if r, ok := tb.Route("a", 0, 1); !ok || r != 1 {
		t.Fatalf("Route avoiding the only broker = (%d, %v), want (1, true)", r, ok)
	}
	tb.SetBroker(Broker{ID: 2, Addr: "h2"})
	if r, ok := tb.Route("a", 0, 1); !ok || r != 2 {
		t.Fatalf("Route avoiding owner = (%d, %v), want (2, true)", r, ok)
	}
	// Avoiding a broker that is not the owner keeps the owner.
	if r, ok := tb.Route("a", 0, 2); !ok || r != 1 {
		t.Fatalf("Route avoiding non-owner = (%d, %v), want (1, true)", r, ok)
	}
	// Unknown topics are routed by rendezvous (the broker answers for them).
	if _, ok := tb.Route("nope", 3, -1); !ok {
		t.Fatal("Route for unknown topic failed")
	}
}

func TestOwnersBeforeTopic(t *testing.T) {
	tb := NewTable()
	tb.SetBroker(Broker{ID: 1, Addr: "h1"})
	tb.SetOwner("late", 0, 1)
	tb.SetEpoch("late", 0, 3)
	tb.SetOwner("late", 5, 1)
	if _, ok := tb.Topic("late"); ok {
		t.Fatal("Topic known before its topic key")
	}
	if got := tb.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
	tb.SetTopic(topic("late", 2))
	if o, e, owned := tb.Owner("late", 0); o != 1 || e != 3 || !owned {
		t.Fatalf("Owner(late,0) = (%d,%d,%v), want (1,3,true)", o, e, owned)
	}
	if _, _, owned := tb.Owner("late", 5); owned {
		t.Fatal("partition 5 routable before the topic has 6 partitions")
	}
	tb.SetTopic(topic("late", 8))
	if o, _, owned := tb.Owner("late", 5); o != 1 || !owned {
		t.Fatalf("Owner(late,5) after growth = (%d,%v), want (1,true)", o, owned)
	}
	if o, _, _ := tb.Owner("late", 0); o != 1 {
		t.Fatalf("Owner(late,0) lost on growth: %d", o)
	}
	if got := tb.Len(); got != 2 {
		t.Fatalf("Len = %d, want 2", got)
	}
}

func TestUnknownTopicEntriesAreForgotten(t *testing.T) {
	tb := NewTable()
	tb.SetOwner("ghost", 0, 1)
	tb.SetEpoch("ghost", 0, 1)
	tb.DeleteOwner("ghost", 0)
	tb.SetEpoch("ghost", 0, -1)
	if n := len(tb.st.Load().topics); n != 0 {
		t.Fatalf("%d topic entries left after all keys of an unknown topic were deleted", n)
	}
	// A topic deleted while owners remain keeps them until they go.
	tb.SetTopic(topic("t", 1))
	tb.SetOwner("t", 0, 1)
	tb.DeleteTopic("t")
	if _, ok := tb.Topic("t"); ok {
		t.Fatal("deleted topic still known")
	}
	if o, _, _ := tb.Owner("t", 0); o != 1 {
		t.Fatalf("owner of deleted topic dropped early: %d", o)
	}
	tb.DeleteOwner("t", 0)
	if n := len(tb.st.Load().topics); n != 0 {
		t.Fatalf("%d topic entries left after deleted topic lost its owners", n)
	}
	if tb.Len() != 0 {
		t.Fatalf("Len = %d, want 0", tb.Len())
	}
}

func TestTopicsAndBrokers(t *testing.T) {
	tb := NewTable()
	for _, n := range []string{"c", "a", "b"} {
		tb.SetTopic(topic(n, 1))
	}
	tb.SetOwner("zzz-unknown", 0, 1) // not a topic
	var names []string
	for _, tp := range tb.Topics() {
		names = append(names, tp.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Fatalf("Topics = %v", names)
	}
	if tp, ok := tb.Topic("b"); !ok || !reflect.DeepEqual(tp, topic("b", 1)) {
		t.Fatalf("Topic(b) = %+v, %v", tp, ok)
	}
	// Large and negative ids take the sparse path of the liveness check.
	ids := []int32{70000, 3, 1, -4, 2}
	for _, id := range ids {
		tb.SetBroker(Broker{ID: id, Addr: fmt.Sprintf("h%d", id)})
	}
	var got []int32
	for _, b := range tb.Brokers() {
		got = append(got, b.ID)
	}
	if !reflect.DeepEqual(got, []int32{-4, 1, 2, 3, 70000}) {
		t.Fatalf("Brokers = %v", got)
	}
	for _, id := range ids {
		if b, ok := tb.Broker(id); !ok || b.ID != id || !tb.st.Load().brokers.live(id) {
			t.Fatalf("Broker(%d) = %+v, %v", id, b, ok)
		}
	}
	for _, id := range []int32{0, 4, 69999, 1 << 16, -1} {
		if _, ok := tb.Broker(id); ok || tb.st.Load().brokers.live(id) {
			t.Fatalf("Broker(%d) live, want not", id)
		}
	}
	tb.DeleteBroker(70000)
	if _, ok := tb.Broker(70000); ok {
		t.Fatal("deleted broker still live")
	}
}

func TestGroups(t *testing.T) {
	tb := NewTable()
	tb.SetBroker(Broker{ID: 1, Addr: "h1"})
	tb.SetBroker(Broker{ID: 2, Addr: "h2"})
	if b, owned := tb.Coordinator("g"); b != -1 || owned {
		t.Fatalf("Coordinator(unknown) = (%d, %v)", b, owned)
	}
	tb.SetCoordinator("g", 2)
	tb.SetCoordinatorEpoch("g", 5)
	if b, owned := tb.Coordinator("g"); b != 2 || !owned {
		t.Fatalf("Coordinator = (%d, %v), want (2, true)", b, owned)
	}
	if e := tb.CoordinatorEpoch("g"); e != 5 {
		t.Fatalf("CoordinatorEpoch = %d", e)
	}
	if r, ok := tb.RouteGroup("g", -1); !ok || r != 2 {
		t.Fatalf("RouteGroup = (%d, %v)", r, ok)
	}
	if r, ok := tb.RouteGroup("g", 2); !ok || r != 1 {
		t.Fatalf("RouteGroup avoiding coordinator = (%d, %v)", r, ok)
	}
	tb.SetCoordinator("g", 9) // not live
	if _, owned := tb.Coordinator("g"); owned {
		t.Fatal("dead coordinator counts as owned")
	}
	tb.DeleteCoordinator("g")
	tb.SetCoordinatorEpoch("g", -1)
	n := 0
	tb.st.Load().groups.each(func(string, uint64) { n++ })
	if n != 0 {
		t.Fatalf("%d groups held after all their keys were deleted", n)
	}
	// Many groups spread over shards and all stay reachable.
	for i := range 5000 {
		tb.SetCoordinator(fmt.Sprintf("g%d", i), int32(i%2+1))
	}
	for i := range 5000 {
		if b, owned := tb.Coordinator(fmt.Sprintf("g%d", i)); b != int32(i%2+1) || !owned {
			t.Fatalf("Coordinator(g%d) = (%d, %v)", i, b, owned)
		}
	}
}

func TestChanged(t *testing.T) {
	tb := NewTable()
	ch := tb.Changed()
	select {
	case <-ch:
		t.Fatal("Changed closed before any change")
	default:
	}
	if tb.Changed() != ch {
		t.Fatal("Changed returned a new channel without a change")
	}
	tb.SetTopic(topic("a", 1))
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed after SetTopic")
	}
	writes := []step{
		func(t *Table) { t.SetBroker(Broker{ID: 1}) },
		func(t *Table) { t.SetOwner("a", 0, 1) },
		func(t *Table) { t.SetEpoch("a", 0, 1) },
		func(t *Table) { t.SetCoordinator("g", 1) },
		func(t *Table) { t.DeleteOwner("a", 0) },
		func(t *Table) { t.DeleteBroker(1) },
		func(t *Table) { t.DeleteTopic("a") },
		func(t *Table) { t.Replace(NewBuilder()) },
	}
	for i, w := range writes {
		ch := tb.Changed()
		w(tb)
		select {
		case <-ch:
		default:
			t.Fatalf("write %d did not close Changed", i)
		}
	}
	// A write that changes nothing does not wake waiters.
	tb.SetBroker(Broker{ID: 7, Addr: "x"})
	ch = tb.Changed()
	tb.SetBroker(Broker{ID: 7, Addr: "x"})
	tb.DeleteOwner("nope", 1)
	select {
	case <-ch:
		t.Fatal("no-op writes closed Changed")
	default:
	}
}

func TestReplace(t *testing.T) {
	tb := NewTable()
	tb.SetBroker(Broker{ID: 1, Addr: "old"})
	tb.SetTopic(topic("old", 2))
	tb.SetOwner("old", 0, 1)
	tb.SetCoordinator("oldg", 1)

	b := NewBuilder()
	b.SetBroker(Broker{ID: 2, Addr: "h2"})
	b.SetTopic(topic("t", 3))
	b.SetOwner("t", 0, 2)
	b.SetEpoch("t", 0, 4)
	b.SetOwner("t", 7, 2) // beyond count: kept in overflow
	b.SetOwner("pending", 1, 2)
	b.SetEpoch("t", 1, 2)
	b.SetCoordinator("g", 2)
	b.SetCoordinatorEpoch("g", 3)
	tb.Replace(b)

	if _, ok := tb.Topic("old"); ok {
		t.Fatal("old topic survived Replace")
	}
	if _, ok := tb.Broker(1); ok {
		t.Fatal("old broker survived Replace")
	}
	if b, _ := tb.Coordinator("oldg"); b != -1 {
		t.Fatal("old group survived Replace")
	}
	if o, e, owned := tb.Owner("t", 0); o != 2 || e != 4 || !owned {
		t.Fatalf("Owner(t,0) = (%d,%d,%v)", o, e, owned)
	}
	if got := tb.Len(); got != 3 {
		t.Fatalf("Len = %d, want 3 (t/0, t/7, pending/1)", got)
	}
	tb.SetTopic(topic("t", 8))
	if o, _, owned := tb.Owner("t", 7); o != 2 || !owned {
		t.Fatalf("overflow owner lost across Replace: (%d,%v)", o, owned)
	}
	tb.SetTopic(topic("pending", 2))
	if o, _, _ := tb.Owner("pending", 1); o != 2 {
		t.Fatalf("owner of unknown topic lost across Replace: %d", o)
	}
	if c, owned := tb.Coordinator("g"); c != 2 || !owned || tb.CoordinatorEpoch("g") != 3 {
		t.Fatalf("Coordinator(g) = (%d,%v) epoch %d", c, owned, tb.CoordinatorEpoch("g"))
	}
	// Incremental writes continue on the replaced table.
	tb.DeleteOwner("t", 7)
	tb.DeleteOwner("pending", 1)
	if got := tb.Len(); got != 1 {
		t.Fatalf("Len after deletes = %d, want 1", got)
	}
}

func TestSnapshot(t *testing.T) {
	tb := NewTable()
	tb.SetBroker(Broker{ID: 1, Addr: "h1", Rack: "r1"})
	tb.SetTopic(topic("a", 2))
	tb.SetOwner("a", 0, 1)
	tb.SetEpoch("a", 0, 2)
	tb.SetOwner("a", 1, 5)
	tb.SetCoordinator("g", 1)
	tb.SetOwner("unknown", 0, 1) // not in the snapshot: no topic key
	got := tb.Snapshot()
	want := Snapshot{
		Brokers: []Broker{{ID: 1, Addr: "h1", Rack: "r1"}},
		Topics:  []SnapshotTopic{{Name: "a", ID: "01020300000000000000000000000000", Partitions: 2, Configs: map[string]string{"cleanup.policy": "delete"}}},
		Partitions: []SnapshotPartition{
			{Topic: "a", Partition: 0, Owner: 1, Epoch: 2, Live: true},
			{Topic: "a", Partition: 1, Owner: 5, Epoch: -1, Live: false},
		},
		Groups:    []SnapshotGroup{{Group: "g", Coordinator: 1, Epoch: -1, Live: true}},
		FetchFrom: "owner",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Snapshot = %+v\nwant %+v", got, want)
	}
	tb.SetZoneReads(true)
	if got := tb.Snapshot().FetchFrom; got != "zone" {
		t.Fatalf("Snapshot.FetchFrom = %q with zone reads on, want zone", got)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatalf("marshal snapshot: %v", err)
	}
}

func TestPack(t *testing.T) {
	for _, c := range [][2]int32{{-1, -1}, {0, 0}, {1, -1}, {-1, 7}, {2147483647, 2147483647}, {5, 1 << 30}} {
		o, e := unpack(pack(c[0], c[1]))
		if o != c[0] || e != c[1] {
			t.Fatalf("unpack(pack(%d,%d)) = (%d,%d)", c[0], c[1], o, e)
		}
	}
	if pack(-1, -1) != 0 {
		t.Fatal("empty ownership value is not zero")
	}
}
