package layout

import "testing"

func seeds(ids ...int32) []Seeded {
	out := make([]Seeded, len(ids))
	for i, id := range ids {
		out[i] = Seed(id)
	}
	return out
}

func TestRendezvousExcludes(t *testing.T) {
	brokers := seeds(1, 2, 3, 4, 5)
	for p := range int32(500) {
		key := PartitionKey("t", p)
		first, ok := Rendezvous(key, brokers, nil)
		if !ok {
			t.Fatal("no choice among five brokers")
		}
		second, ok := Rendezvous(key, brokers, []int32{first})
		if !ok || second == first {
			t.Fatalf("partition %d: excluding %d gave %d, %v", p, first, second, ok)
		}
		// The choice does not depend on the order brokers are listed in.
		if rev, _ := Rendezvous(key, seeds(5, 4, 3, 2, 1), nil); rev != first {
			t.Fatalf("partition %d: %d in id order, %d in reverse order", p, first, rev)
		}
	}
	if b, ok := Rendezvous(GroupKey("g"), brokers, []int32{1, 2, 3, 4, 5}); ok {
		t.Fatalf("every broker excluded, got %d", b)
	}
	if b, ok := Rendezvous(AnyKey("k"), nil, nil); ok {
		t.Fatalf("no brokers, got %d", b)
	}
}

func TestRendezvousTieGoesToLowerID(t *testing.T) {
	same := []Seeded{{ID: 9, Seed: 42}, {ID: 3, Seed: 42}, {ID: 7, Seed: 42}}
	if b, _ := Rendezvous(1, same, nil); b != 3 {
		t.Fatalf("tie went to %d, want 3", b)
	}
}

func TestRendezvousKeysAreDistinctDomains(t *testing.T) {
	// A group, a partition and an any-broker request with the same name must
	// not all land on one broker because their keys collide.
	if PartitionKey("x", 0) == GroupKey("x") || GroupKey("x") == AnyKey("x") || PartitionKey("x", 0) == AnyKey("x") {
		t.Fatal("rendezvous keys of different kinds collide")
	}
}

func BenchmarkRendezvous(b *testing.B) {
	brokers := make([]Seeded, 1000)
	for i := range brokers {
		brokers[i] = Seed(int32(i))
	}
	exclude := []int32{1, 2}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := Rendezvous(PartitionKey("topic", int32(i)), brokers, exclude); !ok {
			b.Fatal("no choice")
		}
	}
}
