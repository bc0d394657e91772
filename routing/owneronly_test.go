package routing

import "testing"

// TestOwnerOnly: with owner-only routing an owned partition or group never
// leaves its owner, one owned by a broker that is not live has no route,
// and an unowned one goes to the same rendezvous choice as without it.
func TestOwnerOnly(t *testing.T) {
	tb := NewTable()
	for id := int32(1); id <= 3; id++ {
		tb.SetBroker(Broker{ID: id, Addr: "b"})
	}
	tb.SetTopic(Topic{Name: "t", Partitions: 4})
	tb.SetOwner("t", 0, 2) // owned by a live broker
	tb.SetOwner("t", 1, 9) // owned by a broker missing from the broker list
	tb.SetCoordinator("live", 3)
	tb.SetCoordinator("missing", 9)
	refused := func(ids ...int32) Avoid {
		var a Avoid
		for _, id := range ids {
			a.Add(id)
		}
		return a
	}
	plain, _ := tb.RouteAvoiding("t", 2, Avoid{}) // unowned, before owner-only
	plainAvoid, _ := tb.RouteAvoiding("t", 2, refused(plain))
	tb.SetOwnerOnly(true)
	if !tb.OwnerOnly() {
		t.Fatal("OwnerOnly() = false after SetOwnerOnly(true)")
	}
	cases := []struct {
		name   string
		route  func() (int32, bool)
		want   int32
		wantOK bool
	}{
		{"owned", func() (int32, bool) { return tb.RouteAvoiding("t", 0, Avoid{}) }, 2, true},
		{"owned, owner refused", func() (int32, bool) { return tb.RouteAvoiding("t", 0, refused(2)) }, 2, true},
		{"owner not live", func() (int32, bool) { return tb.RouteAvoiding("t", 1, Avoid{}) }, -1, false},
		{"unowned", func() (int32, bool) { return tb.RouteAvoiding("t", 2, Avoid{}) }, plain, true},
		{"unowned, refused", func() (int32, bool) { return tb.RouteAvoiding("t", 2, refused(plain)) }, plainAvoid, true},
		{"group owned, refused", func() (int32, bool) { return tb.RouteGroupAvoiding("live", refused(3)) }, 3, true},
		{"group coordinator not live", func() (int32, bool) { return tb.RouteGroupAvoiding("missing", Avoid{}) }, -1, false},
	}
	for _, c := range cases {
		if b, ok := c.route(); b != c.want || ok != c.wantOK {
			t.Errorf("%s: routed to %d (ok=%v), want %d (ok=%v)", c.name, b, ok, c.want, c.wantOK)
		}
	}
	if plainAvoid == plain {
		t.Fatalf("avoiding %d still chose it", plain)
	}
	// The missing owner appears: its partitions route to it.
	tb.SetBroker(Broker{ID: 9, Addr: "b9"})
	if b, ok := tb.RouteAvoiding("t", 1, Avoid{}); !ok || b != 9 {
		t.Errorf("after broker 9 appeared: routed to %d (ok=%v), want 9", b, ok)
	}
	tb.SetOwnerOnly(false)
	if b, ok := tb.RouteAvoiding("t", 0, refused(2)); !ok || b == 2 {
		t.Errorf("owner-only off: refused owner still chosen (%d, %v)", b, ok)
	}
}
