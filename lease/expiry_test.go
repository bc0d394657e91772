package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/lease"
)

// TestLocalExpiryBeforeServer stalls the network between a session and etcd:
// keepalives go unanswered. Owns must turn false by the last send + TTL -
// margin, while the server still has the owner key; the server deletes it
// later; the loss is reported; and once the network is back the session has a
// new lease, its registered key back, and can acquire again.
func TestLocalExpiryBeforeServer(t *testing.T) {
	srv, direct := startEtcd(t)
	rl := newRelay(t, srv.Endpoint[len("http://"):])
	s := newSession(t, etcdtest.NewClient(t, rl.Endpoint()), 1)
	t.Cleanup(s.Close) // before the relay client closes
	r := testPartition("demo", 0)
	o := mustAcquire(t, s, r)
	brokerKey := testLayout.BrokerKey(1)
	if err := s.Register(tctx(t, 5*time.Second), brokerKey, "b1"); err != nil {
		t.Fatal(err)
	}
	oldLease := s.LeaseID()

	// Every keepalive answered so far was sent before now.
	paused := time.Now()
	rl.Pause()
	limit := paused.Add(testTTL - testMargin)
	falseAt := eventually(t, testTTL, "Owns false after keepalives stop", func() bool {
		_, ok := s.Owns(r)
		return !ok
	})
	if slack := 20 * time.Millisecond; falseAt.After(limit.Add(slack)) {
		t.Fatalf("Owns still true %v after the last possible answered send + TTL - margin", falseAt.Sub(limit))
	}
	if _, _, _, found := get(t, direct, r.OwnerKey); !found {
		t.Fatal("server dropped the owner key before the session stopped owning: no margin")
	}
	if _, err := s.Acquire(tctx(t, time.Second), r); !errors.Is(err, lease.ErrNoLease) || !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("acquire without a valid lease = %v; want ErrNotOwner/ErrNoLease", err)
	}
	if _, err := s.FencedCommit(tctx(t, time.Second), o, []byte("x")); !errors.Is(err, lease.ErrNotOwner) {
		t.Fatalf("commit without a valid lease = %v; want ErrNotOwner", err)
	}
	if l := nextLoss(t, s, testTTL); !l.Session || len(l.Resources) != 1 || l.Resources[0] != r || l.Reason == nil {
		t.Fatalf("loss = %+v, want one session loss covering %s with a reason", l, r.Name)
	}
	if st := s.Stats(); st.SessionLosses != 1 || st.OwnershipsLost != 1 {
		t.Fatalf("stats = %+v; want 1 session loss, 1 ownership lost", st)
	}
	select {
	case <-o.Lost():
	default:
		t.Fatal("ownership's Lost channel still open after the session loss")
	}
	goneAt := eventually(t, 2*testTTL+2*time.Second, "server deletes the expired owner key", func() bool {
		_, _, _, found := get(t, direct, r.OwnerKey)
		return !found
	})
	t.Logf("Owns false %v after pause (limit %v); server expiry %v after Owns false",
		falseAt.Sub(paused), testTTL-testMargin, goneAt.Sub(falseAt))

	rl.Resume()
	eventually(t, 3*testTTL, "session renews its lease", func() bool {
		return s.Valid() && s.LeaseID() != oldLease
	})
	eventually(t, 3*testTTL, "registered key re-put under the new lease", func() bool {
		resp, err := direct.Get(tctx(t, time.Second), brokerKey)
		return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].Lease == int64(s.LeaseID())
	})
	o2 := mustAcquire(t, s, r)
	if o2.Epoch != 2 || o2.Token <= o.Token {
		t.Fatalf("re-acquired with epoch %d token %d; want epoch 2, token > %d", o2.Epoch, o2.Token, o.Token)
	}
}

// TestAmbiguousCommit: errors whose outcome is unknown are ErrAmbiguous, never
// ErrFenced, keep the ownership but require a re-read before serving again.
func TestAmbiguousCommit(t *testing.T) {
	testDeadContextIsDefinite(t)
	tests := []struct {
		name string
		// commitCtx returns the context for the commit and is free to break
		// the network; restore undoes it.
		commitCtx func(t *testing.T, rl *relay) context.Context
		restore   func(rl *relay)
	}{
		{"cut connection", func(t *testing.T, rl *relay) context.Context {
			rl.Cut()
			return tctx(t, 300*time.Millisecond)
		}, (*relay).Resume},
		{"stalled connection", func(t *testing.T, rl *relay) context.Context {
			rl.Pause()
			return tctx(t, 300*time.Millisecond)
		}, (*relay).Resume},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, direct := startEtcd(t)
			rl := newRelay(t, srv.Endpoint[len("http://"):])
			s := newSession(t, etcdtest.NewClient(t, rl.Endpoint()), 1)
			t.Cleanup(s.Close)
			r := testPartition("demo", 0)
			o := mustAcquire(t, s, r)

			_, err := s.FencedCommit(tc.commitCtx(t, rl), o, []byte("maybe"))
			tc.restore(rl)
			if !errors.Is(err, lease.ErrAmbiguous) || isFenced(err) {
				t.Fatalf("commit error = %v; want ErrAmbiguous and not ErrFenced", err)
			}
			if !o.NeedsReread() {
				t.Fatal("ambiguous commit did not mark the ownership for re-read")
			}
			if _, ok := s.Owns(r); ok {
				t.Fatal("Owns true while the state is unknown")
			}
			if _, err := s.FencedCommit(tctx(t, 5*time.Second), o, []byte("next")); !errors.Is(err, lease.ErrNeedsReread) {
				t.Fatalf("commit before re-read = %v; want ErrNeedsReread", err)
			}
			// A commit held by a stalled connection may still reach etcd after
			// the resume, and then after a re-read (that is why a later commit
			// compares the state revision). Give it time to land first, so that
			// the re-read below is the final state.
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if val, _, _, _ := get(t, direct, r.StateKey); val == "maybe" {
					break
				}
			}
			// Acquire on the held ownership re-reads it.
			if got, err := s.Acquire(tctx(t, 10*time.Second), r); err != nil || got != o {
				t.Fatalf("acquire to re-read = %v, %v; want the same ownership", got, err)
			}
			val, modRev, _, _ := get(t, direct, r.StateKey)
			if o.NeedsReread() || o.StateRev != modRev || string(o.State) != val {
				t.Fatalf("after re-read: rev %d state %q; etcd has rev %d state %q", o.StateRev, o.State, modRev, val)
			}
			if _, err := s.FencedCommit(tctx(t, 5*time.Second), o, []byte("next")); err != nil {
				t.Fatalf("commit after re-read: %v", err)
			}
			noLoss(t, s)
		})
	}
}

// testDeadContextIsDefinite: a commit whose context ended before it could be
// sent is refused definitely: nothing went to etcd, so the ownership stays
// usable without a re-read (it used to be reported ambiguous).
func testDeadContextIsDefinite(t *testing.T) {
	_, cli := startEtcd(t)
	s := newSession(t, cli, 1)
	r := testPartition("demo", 0)
	o := mustAcquire(t, s, r)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "expired": expired} {
		_, err := s.FencedCommit(ctx, o, []byte("never"))
		if !errors.Is(err, lease.ErrNotSent) || errors.Is(err, lease.ErrAmbiguous) || isFenced(err) {
			t.Fatalf("%s context: commit error = %v; want ErrNotSent only", name, err)
		}
		if o.NeedsReread() {
			t.Fatalf("%s context: a commit never sent marked the ownership for re-read", name)
		}
	}
	if _, err := s.FencedCommit(tctx(t, 5*time.Second), o, []byte("next")); err != nil {
		t.Fatalf("commit after the refused ones: %v", err)
	}
}
