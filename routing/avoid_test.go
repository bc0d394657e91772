package routing

import "testing"

func TestAvoidSet(t *testing.T) {
	var a Avoid
	if a.Has(0) || a.Last() != -1 {
		t.Fatalf("zero Avoid avoids something: %+v", a)
	}
	a.Add(-1)
	if a.n != 0 {
		t.Fatalf("negative id was remembered")
	}
	for id := int32(1); id <= maxAvoid+2; id++ {
		a.Add(id)
		a.Add(id) // duplicates are not remembered twice
	}
	if a.Has(1) || a.Has(2) || !a.Has(3) || !a.Has(maxAvoid+2) {
		t.Fatalf("Avoid should keep the %d most recent refusers: %+v", maxAvoid, a)
	}
	if a.Last() != maxAvoid+2 {
		t.Fatalf("Last = %d, want %d", a.Last(), maxAvoid+2)
	}
	a.Add(3) // a repeat refuser becomes the most recent one
	if a.Last() != 3 || !a.Has(maxAvoid+2) {
		t.Fatalf("after re-adding 3: Last = %d, %+v", a.Last(), a)
	}
}

// TestAvoidNeverLeavesNothing: with one live broker that already refused,
// a retry still goes to it; a partition nobody is asked to take would stay
// unowned while clients wait for a metadata change.
func TestAvoidNeverLeavesNothing(t *testing.T) {
	tb := NewTable()
	tb.SetBroker(Broker{ID: 2})
	var a Avoid
	a.Add(3) // a dead owner whose lease just expired
	a.Add(2)
	for name, route := range map[string]func() (int32, bool){
		"partition":    func() (int32, bool) { return tb.RouteAvoiding("t", 1, a) },
		"group":        func() (int32, bool) { return tb.RouteGroupAvoiding("g", a) },
		"any":          func() (int32, bool) { return tb.AnyBrokerAvoiding("k", a) },
		"single avoid": func() (int32, bool) { return tb.Route("t", 1, 2) },
	} {
		if b, ok := route(); !ok || b != 2 {
			t.Errorf("%s: routed to %d (ok=%v), want the only live broker 2", name, b, ok)
		}
	}
	if _, ok := NewTable().RouteAvoiding("t", 1, a); ok {
		t.Error("routed with no live broker at all")
	}
}

// TestRetriesVisitEveryBroker: a retry loop that avoids every refuser so far
// reaches each live broker once before starting over, instead of alternating
// between the first two refusers.
func TestRetriesVisitEveryBroker(t *testing.T) {
	tb := NewTable()
	for id := int32(1); id <= 4; id++ {
		tb.SetBroker(Broker{ID: id})
	}
	tests := []struct {
		name  string
		route func(Avoid) (int32, bool)
	}{
		{"partition", func(a Avoid) (int32, bool) { return tb.RouteAvoiding("t", 0, a) }},
		{"group", func(a Avoid) (int32, bool) { return tb.RouteGroupAvoiding("g", a) }},
		{"any", func(a Avoid) (int32, bool) { return tb.AnyBrokerAvoiding("k", a) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Avoid
			seen := map[int32]bool{}
			var last int32 = -1
			for i := 0; i < 4; i++ {
				b, ok := tt.route(a)
				if !ok || seen[b] {
					t.Fatalf("attempt %d went to %d (ok=%v) after %v", i, b, ok, seen)
				}
				seen[b], last = true, b
				a.Add(b)
			}
			// Every live broker refused: start over, but not on the last refuser.
			b, ok := tt.route(a)
			if !ok || b == last {
				t.Fatalf("after all refused: got %d (ok=%v), last refuser %d", b, ok, last)
			}
		})
	}
}
