package routing

import (
	"fmt"
	"testing"
)

func brokersTable(ids ...int32) *Table {
	tb := NewTable()
	for _, id := range ids {
		tb.SetBroker(Broker{ID: id, Addr: fmt.Sprint(id)})
	}
	return tb
}

func seq(n int32) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func routes(tb *Table, n int32) []int32 {
	out := make([]int32, n)
	for p := range n {
		out[p], _ = tb.Route("topic", p, -1)
	}
	return out
}

func TestRendezvousRemovingBrokerMovesOnlyItsPartitions(t *testing.T) {
	const parts = 20000
	tb := brokersTable(seq(40)...)
	before := routes(tb, parts)
	const gone = 17
	tb.DeleteBroker(gone)
	after := routes(tb, parts)
	moved := 0
	for p := range parts {
		switch {
		case before[p] == gone:
			moved++
			if after[p] == gone {
				t.Fatalf("partition %d still routed to removed broker", p)
			}
		case after[p] != before[p]:
			t.Fatalf("partition %d moved %d -> %d though its broker stayed", p, before[p], after[p])
		}
	}
	if moved == 0 {
		t.Fatal("removed broker had no partitions: the test proves nothing")
	}
	// Adding it back restores the original routes exactly.
	tb.SetBroker(Broker{ID: gone, Addr: "back"})
	again := routes(tb, parts)
	for p := range parts {
		if again[p] != before[p] {
			t.Fatalf("partition %d: %d after re-adding, %d before", p, again[p], before[p])
		}
	}
}

func TestRendezvousSameOnEveryReplica(t *testing.T) {
	a := brokersTable(1, 2, 3, 4, 5, 6, 7)
	b := brokersTable(7, 3, 5, 1, 6, 2, 4) // other insertion order
	for p := range int32(2000) {
		ra, _ := a.Route("x", p, 3)
		rb, _ := b.Route("x", p, 3)
		if ra != rb {
			t.Fatalf("replicas disagree on partition %d: %d vs %d", p, ra, rb)
		}
	}
	for i := range 500 {
		g := fmt.Sprintf("group-%d", i)
		ga, _ := a.RouteGroup(g, -1)
		gb, _ := b.RouteGroup(g, -1)
		ka, _ := a.AnyBroker(g, 2)
		kb, _ := b.AnyBroker(g, 2)
		if ga != gb || ka != kb || ka == 2 {
			t.Fatalf("replicas disagree on %s: group %d/%d any %d/%d", g, ga, gb, ka, kb)
		}
	}
}

// TestRendezvousGolden pins the hash so that a change to it is deliberate:
// during a rolling upgrade, replicas with different hashes would disagree.
func TestRendezvousGolden(t *testing.T) {
	tb := brokersTable(seq(10)...)
	got := routes(tb, 12)
	want := goldenRoutes
	for p := range got {
		if got[p] != want[p] {
			t.Fatalf("routes = %v, want %v", got, want)
		}
	}
	g, _ := tb.RouteGroup("my-group", -1)
	k, _ := tb.AnyBroker("admin", -1)
	if g != goldenGroup || k != goldenAny {
		t.Fatalf("RouteGroup = %d (want %d), AnyBroker = %d (want %d)", g, goldenGroup, k, goldenAny)
	}
}

func TestRendezvousBalance(t *testing.T) {
	const brokers, parts = 20, 100000
	tb := brokersTable(seq(brokers)...)
	count := map[int32]int{}
	for _, r := range routes(tb, parts) {
		count[r]++
	}
	mean := parts / brokers
	for id := range int32(brokers) {
		if c := count[id]; c < mean*85/100 || c > mean*115/100 {
			t.Fatalf("broker %d got %d partitions, mean %d: %v", id, c, mean, count)
		}
	}
	// Avoiding the first choice gives every partition a different broker,
	// and spreads the removed broker's load over the others.
	spread := map[int32]int{}
	for p := range int32(parts) {
		first, _ := tb.Route("topic", p, -1)
		if first != 0 {
			continue
		}
		second, ok := tb.Route("topic", p, first)
		if !ok || second == first {
			t.Fatalf("partition %d: avoid %d gave %d", p, first, second)
		}
		spread[second]++
	}
	if len(spread) != brokers-1 {
		t.Fatalf("avoided broker's partitions went to %d brokers, want %d", len(spread), brokers-1)
	}
}

var (
	goldenRoutes           = []int32{5, 7, 0, 7, 9, 3, 6, 5, 0, 1, 2, 1}
	goldenGroup, goldenAny = int32(4), int32(7)
)
