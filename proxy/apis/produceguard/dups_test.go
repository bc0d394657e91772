package produceguard

import (
	"fmt"
	"testing"
)

// TestDups: the earlier listings of a key repeated later are dropped, the
// last kept, pairwise (few listings) and by map (many) alike.
func TestDups(t *testing.T) {
	for _, n := range []int{3, quadratic + 8} {
		t.Run(fmt.Sprint(n, " listings"), func(t *testing.T) {
			var d Dups
			for round := range 2 { // reused scratch
				d.Reset()
				for i := range n {
					d.Add(Key{Topic: "t", Part: int32(i)})
				}
				d.Add(Key{Topic: "t", Part: 0})            // listed again: listing 0 dropped
				d.Add(Key{Topic: "u", Part: 1})            // another topic: no duplicate
				d.Add(Key{ID: [16]byte{1}, Part: 1})       // by id: no duplicate of "t"
				d.Add(Key{Topic: "t", Part: int32(n - 1)}) // listing n-1 dropped
				if got := d.Mark(); got != 2 || d.Count() != 2 {
					t.Fatalf("round %d: Mark = %d, want 2", round, got)
				}
				for i := range n + 4 {
					want := i == 0 || i == n-1
					if d.Dropped(i) != want {
						t.Errorf("round %d: listing %d dropped %v, want %v", round, i, d.Dropped(i), want)
					}
				}
			}
		})
	}
	var d Dups
	d.Add(Key{Topic: "t"})
	if d.Mark() != 0 || d.Dropped(0) {
		t.Fatal("one listing is no duplicate")
	}
}
