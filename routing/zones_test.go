package routing

import (
	"fmt"
	"testing"

	"github.com/kproxy/kproxy/layout"
)

// zoneTable is three zones of two brokers: a={1,2}, b={3,4}, c={5,6}.
func zoneTable() *Table {
	tb := NewTable()
	for id := int32(1); id <= 6; id++ {
		tb.SetBroker(Broker{ID: id, Addr: fmt.Sprint(id), Rack: string(rune('a' + (id-1)/2))})
	}
	tb.SetTopic(Topic{Name: "t", Partitions: 8})
	tb.SetZoneReads(true)
	return tb
}

// inZone is the rendezvous choice among ids, computed independently of the
// table: the one function every proxy and broker uses.
func inZone(topic string, p int32, ids ...int32) int32 {
	var seeds []layout.Seeded
	for _, id := range ids {
		seeds = append(seeds, layout.Seed(id))
	}
	b, _ := layout.Rendezvous(layout.PartitionKey(topic, p), seeds, nil)
	return b
}

func TestRouteRead(t *testing.T) {
	tb := zoneTable()
	tb.SetOwner("t", 0, 1) // owner in zone a
	tb.SetOwner("t", 1, 3) // owner in zone b
	usual := func(p int32, avoid Avoid) int32 { b, _ := tb.RouteAvoiding("t", p, avoid); return b }
	cases := []struct {
		name  string
		p     int32
		zone  string
		avoid Avoid
		want  int32
		why   Read
	}{
		{"owner in the client's zone", 0, "a", Avoid{}, 1, ReadOwnerInZone},
		{"owner elsewhere: rendezvous in the zone", 0, "b", Avoid{}, inZone("t", 0, 3, 4), ReadInZone},
		{"unowned: rendezvous in the zone", 2, "c", Avoid{}, inZone("t", 2, 5, 6), ReadInZone},
		{"owner in zone refused: the other zone broker", 0, "a", AvoidOne(1), 2, ReadInZone},
		{"zone broker refused: the other one", 1, "a", AvoidOne(inZone("t", 1, 1, 2)), 3 - inZone("t", 1, 1, 2), ReadInZone},
		{"whole zone refused: the usual route", 1, "c", avoidAll(5, 6), usual(1, avoidAll(5, 6)), ReadZoneRefused},
		{"unknown client zone", 1, "", Avoid{}, 3, ReadNoClientZone},
		{"zone without brokers", 1, "z", Avoid{}, 3, ReadNoZoneBroker},
	}
	for _, c := range cases {
		b, why, ok := tb.RouteRead("t", c.p, c.zone, c.avoid)
		if !ok || b != c.want || why != c.why {
			t.Errorf("%s: routed to %d (%v, ok=%v), want %d (%v)", c.name, b, why, ok, c.want, c.why)
		}
	}
}

func avoidAll(ids ...int32) Avoid {
	var a Avoid
	for _, id := range ids {
		a.Add(id)
	}
	return a
}

// Owner-only routing and zone reads off both leave reads on the usual route.
func TestRouteReadOff(t *testing.T) {
	for _, c := range []struct {
		name      string
		ownerOnly bool
		zone      bool
	}{{"zone reads off", false, false}, {"owner-only", true, true}} {
		tb := zoneTable()
		tb.SetOwner("t", 0, 1)
		tb.SetZoneReads(c.zone)
		tb.SetOwnerOnly(c.ownerOnly)
		if b, why, ok := tb.RouteRead("t", 0, "b", Avoid{}); !ok || b != 1 || why != ReadOwnerOnly {
			t.Errorf("%s: routed to %d (%v, ok=%v), want the owner 1 (owner_only)", c.name, b, why, ok)
		}
	}
}

// A zone broker leaving moves only the partitions it served in its zone,
// and they stay in the zone; other zones' choices do not move.
func TestRouteReadStableInZone(t *testing.T) {
	tb := NewTable()
	for id := int32(1); id <= 9; id++ {
		tb.SetBroker(Broker{ID: id, Addr: fmt.Sprint(id), Rack: fmt.Sprint("z", (id-1)/3)})
	}
	tb.SetTopic(Topic{Name: "t", Partitions: 600})
	tb.SetZoneReads(true)
	read := func(zone string) []int32 {
		out := make([]int32, 600)
		for p := range int32(600) {
			out[p], _, _ = tb.RouteRead("t", p, zone, Avoid{})
		}
		return out
	}
	z0, z1 := read("z0"), read("z1")
	tb.DeleteBroker(2)
	after0, after1 := read("z0"), read("z1")
	for p := range z0 {
		if z0[p] != 2 && after0[p] != z0[p] {
			t.Fatalf("partition %d moved from %d to %d in z0 though its broker stayed", p, z0[p], after0[p])
		}
		if z0[p] == 2 && after0[p] != 1 && after0[p] != 3 {
			t.Fatalf("partition %d left zone z0: %d", p, after0[p])
		}
		if after1[p] != z1[p] {
			t.Fatalf("partition %d moved in z1 (%d -> %d) when a z0 broker left", p, z1[p], after1[p])
		}
	}
}

// RouteRead takes no lock and allocates nothing: it is on every fetch.
func TestRouteReadAllocs(t *testing.T) {
	tb := zoneTable()
	tb.SetOwner("t", 0, 3)
	if n := testing.AllocsPerRun(100, func() { tb.RouteRead("t", 0, "a", AvoidOne(2)) }); n != 0 {
		t.Fatalf("RouteRead allocates %v times per call", n)
	}
}

// TestRouteWrite: with zone-affine acquisition, a partition nobody owns
// (or whose owner is gone) goes to the rendezvous choice in the producer's
// zone; an owned partition always goes to its owner; off, or without a
// zone, writes take the usual route.
func TestRouteWrite(t *testing.T) {
	tb := zoneTable()
	tb.SetOwner("t", 0, 1) // owned in zone a
	tb.SetOwner("t", 1, 9) // its owner is not live
	usual := func(p int32) int32 { b, _ := tb.RouteAvoiding("t", p, Avoid{}); return b }
	check := func(name string, p int32, zone string, avoid Avoid, want int32) {
		t.Helper()
		if b, ok := tb.RouteWrite("t", p, zone, avoid); !ok || b != want {
			t.Errorf("%s: routed to %d (ok=%v), want %d", name, b, ok, want)
		}
	}
	check("off: usual route", 2, "c", Avoid{}, usual(2))
	tb.SetAcquireInZone(true)
	check("owned: the owner, whatever the zone", 0, "c", Avoid{}, 1)
	check("unowned: rendezvous in the zone", 2, "c", Avoid{}, inZone("t", 2, 5, 6))
	check("owner not live: rendezvous in the zone", 1, "b", Avoid{}, inZone("t", 1, 3, 4))
	check("zone broker refused: the other one", 2, "c", AvoidOne(inZone("t", 2, 5, 6)), 11-inZone("t", 2, 5, 6))
	check("whole zone refused: usual route", 2, "c", avoidAll(5, 6), func() int32 { b, _ := tb.RouteAvoiding("t", 2, avoidAll(5, 6)); return b }())
	check("no zone: usual route", 2, "", Avoid{}, usual(2))
	check("zone without brokers: usual route", 2, "z", Avoid{}, usual(2))
}
