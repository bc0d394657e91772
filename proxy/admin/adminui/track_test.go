package adminui

import (
	"testing"
	"time"

	"github.com/kproxy/kproxy/routing"
)

// fakeClock is advanced by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestTrackerOwnerSinceAndChanges(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	start := clock.t
	tr := newTracker(clock.now, 3)
	tb := routing.NewTable()
	tb.SetBroker(routing.Broker{ID: 1, Addr: "a:1", Rack: "r1"})
	tb.SetBroker(routing.Broker{ID: 2, Addr: "a:2"})
	tb.SetTopic(routing.Topic{Name: "orders", Partitions: 3})
	tb.SetOwner("orders", 0, 1)
	tb.SetOwner("orders", 1, 2)
	tb.SetEpoch("orders", 0, 4)

	v, changes := tr.observe(tb.Snapshot())
	if len(changes) != 0 {
		t.Fatalf("first look reported changes: %+v", changes)
	}
	if got := v.parts[0]; got.Owner != 1 || got.Epoch != 4 || got.SinceKnown || !got.Since.Equal(start) {
		t.Fatalf("orders/0 at start = %+v", got)
	}
	if len(v.brokers) != 2 || v.brokers[0].Partitions != 1 || v.brokers[0].Rack != "r1" || !v.brokers[1].Live {
		t.Fatalf("brokers = %+v", v.brokers)
	}
	if len(v.topics) != 1 || v.topics[0].Partitions != 3 || v.topics[0].Owned != 2 {
		t.Fatalf("topics = %+v", v.topics)
	}

	// Broker 2 leaves; its partition moves to 1, and partition 2 gets its
	// first owner.
	clock.t = start.Add(time.Minute)
	tb.DeleteBroker(2)
	tb.SetOwner("orders", 1, 1)
	tb.SetEpoch("orders", 1, 9)
	tb.SetOwner("orders", 2, 1)
	tb.SetEpoch("orders", 0, 5) // same owner, new epoch: not an ownership change
	v, changes = tr.observe(tb.Snapshot())
	want := []Change{
		{Topic: "orders", Partition: 1, From: 2, To: 1, Epoch: 9, At: clock.t},
		{Topic: "orders", Partition: 2, From: -1, To: 1, Epoch: -1, At: clock.t},
	}
	if len(changes) != len(want) || changes[0] != want[0] || changes[1] != want[1] {
		t.Fatalf("changes = %+v, want %+v", changes, want)
	}
	if p := v.parts[0]; p.Epoch != 5 || !p.Since.Equal(start) || p.SinceKnown {
		t.Fatalf("orders/0 kept its owner, so its since must not move: %+v", p)
	}
	if p := v.parts[1]; p.Owner != 1 || !p.Since.Equal(clock.t) || !p.SinceKnown {
		t.Fatalf("orders/1 after the move = %+v", p)
	}
	if len(v.brokers) != 2 || v.brokers[1].Live || !v.brokers[1].LastSeen.Equal(start) || v.brokers[1].Partitions != 0 {
		t.Fatalf("broker 2 after leaving = %+v", v.brokers)
	}
	if len(v.recent) != 2 || v.recent[0] != want[1] || v.recent[1] != want[0] {
		t.Fatalf("recent (newest first) = %+v", v.recent)
	}

	// recent is bounded, newest first; older views keep what they had.
	old := v
	clock.t = start.Add(2 * time.Minute)
	tb.SetOwner("orders", 0, 7)
	tb.SetOwner("orders", 1, 7)
	v, _ = tr.observe(tb.Snapshot())
	if len(v.recent) != 3 || v.recent[0].Partition != 1 || v.recent[1].Partition != 0 || v.recent[2] != want[1] {
		t.Fatalf("bounded recent = %+v", v.recent)
	}
	if len(old.recent) != 2 || old.recent[0] != want[1] {
		t.Fatalf("an older view's recent changed: %+v", old.recent)
	}

	// A broker gone for longer than forgetBroker is no longer listed.
	clock.t = start.Add(forgetBroker + 2*time.Minute)
	v, _ = tr.observe(tb.Snapshot())
	if len(v.brokers) != 1 || v.brokers[0].ID != 1 {
		t.Fatalf("brokers after an hour = %+v", v.brokers)
	}
}
