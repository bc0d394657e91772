package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/lease"
)

// TestSnapshotStoreTimeline replays the kafka-flow report ("partition
// ownership overlap during unideal circumstances"): node A reads state_0 and
// computes state_5, then stalls past its lease with its write in flight; node
// B takes over, reads state_0, writes state_5 and state_10; A's delayed write
// of state_5 then reaches the store. With the fenced commit it is refused, the
// store keeps state_10, and node C starts from state_10, not from A's stale
// state_5.
func TestSnapshotStoreTimeline(t *testing.T) {
	srv, direct := startEtcd(t)
	rl := newRelay(t, srv.Endpoint[len("http://"):])
	nodeA := newSession(t, etcdtest.NewClient(t, rl.Endpoint()), 1)
	t.Cleanup(nodeA.Close)
	nodeB, nodeC := newSession(t, direct, 2), newSession(t, direct, 3)
	snap := lease.Resource{
		Name:     "snapshot:input/3",
		OwnerKey: testLayout.OwnerKey("input", 3),
		EpochKey: testLayout.EpochKey("input", 3),
		StateKey: "/test/snapshot-store/input/3",
	}
	if _, err := direct.Put(tctx(t, 5*time.Second), snap.StateKey, "state_0"); err != nil {
		t.Fatal(err)
	}

	a := mustAcquire(t, nodeA, snap) // assign partition 3 to A; A reads the store
	if string(a.State) != "state_0" {
		t.Fatalf("A read %q, want state_0", a.State)
	}

	// Unideal circumstances: A's write of state_5 leaves A, then A stalls.
	rl.Pause()
	aWrite := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := nodeA.FencedCommit(ctx, a, []byte("state_5"))
		aWrite <- err
	}()
	eventually(t, testTTL, "A stops owning locally", func() bool {
		_, ok := nodeA.Owns(snap)
		return !ok
	})

	// B is assigned partition 3 once A's lease is gone on the server.
	var b *lease.Ownership
	eventually(t, 3*testTTL, "B acquires after A's lease expires", func() bool {
		o, err := nodeB.Acquire(tctx(t, 5*time.Second), snap)
		if err != nil && !errors.Is(err, lease.ErrOwnedElsewhere) {
			t.Fatalf("B acquire: %v", err)
		}
		b = o
		return err == nil
	})
	if string(b.State) != "state_0" || b.Epoch != 2 || b.Token <= a.Token {
		t.Fatalf("B read %q epoch %d token %d; want state_0, epoch 2, token > %d", b.State, b.Epoch, b.Token, a.Token)
	}
	for _, st := range []string{"state_5", "state_10"} {
		if _, err := nodeB.FencedCommit(tctx(t, 5*time.Second), b, []byte(st)); err != nil {
			t.Fatalf("B writes %s: %v", st, err)
		}
	}

	// A resumes: its delayed write reaches etcd and is refused.
	rl.Resume()
	select {
	case err := <-aWrite:
		if !errors.Is(err, lease.ErrFenced) {
			t.Fatalf("A's stale write of state_5 = %v; want ErrFenced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's write did not finish within 10s of resuming")
	}
	if val, _, _, _ := get(t, direct, snap.StateKey); val != "state_10" {
		t.Fatalf("snapshot store holds %q after A's stale write, want state_10", val)
	}
	// A tries again with what it has: refused without reaching etcd.
	if _, err := nodeA.FencedCommit(tctx(t, 5*time.Second), a, []byte("state_5")); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("A's retry = %v; want ErrNotOwner", err)
	}
	// A's lease expired with the write in flight: one session loss naming
	// the partition; the refusal after it is not reported again.
	if l := nextLoss(t, nodeA, time.Second); len(l.Resources) != 1 || l.Resources[0] != snap {
		t.Fatalf("A's loss = %+v, want %s", l, snap.Name)
	}

	// B stops; C is assigned partition 3 and starts from state_10.
	if err := nodeB.Release(tctx(t, 5*time.Second), snap); err != nil {
		t.Fatal(err)
	}
	c := mustAcquire(t, nodeC, snap)
	if string(c.State) != "state_10" || c.Epoch != 3 {
		t.Fatalf("C read %q at epoch %d; want state_10 at epoch 3", c.State, c.Epoch)
	}
}
