package lease_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
)

func TestResources(t *testing.T) {
	l := layout.New("/k")
	tests := []struct {
		got, want lease.Resource
	}{
		{lease.PartitionResource(l, "demo", 3, "/mine/demo/3"), lease.Resource{
			Name: "demo/3", OwnerKey: l.OwnerKey("demo", 3), EpochKey: l.EpochKey("demo", 3),
			StateKey: "/mine/demo/3"}},
		{lease.GroupResource(l, "g1", "/mine/g1"), lease.Resource{
			Name: "group:g1", OwnerKey: l.CoordinatorKey("g1"), EpochKey: l.CoordinatorEpochKey("g1"),
			StateKey: "/mine/g1"}},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}

func TestAcquireFreeAndHandOver(t *testing.T) {
	_, cli := startEtcd(t)
	s1, s2 := newSession(t, cli, 1), newSession(t, cli, 2)
	r := testPartition("demo", 0)

	o1 := mustAcquire(t, s1, r)
	val, _, createRev, found := get(t, cli, r.OwnerKey)
	if !found {
		t.Fatal("owner key missing after acquire")
	}
	var owner layout.Owner
	if err := layout.Unmarshal([]byte(val), &owner); err != nil || owner.Broker != 1 {
		t.Fatalf("owner key value %q (err %v), want broker 1", val, err)
	}
	if o1.Epoch != 1 || o1.Token != createRev || o1.State != nil || o1.StateRev != 0 {
		t.Fatalf("ownership = epoch %d token %d state %q rev %d; want epoch 1 token %d, no state",
			o1.Epoch, o1.Token, o1.State, o1.StateRev, createRev)
	}
	if got, ok := s1.Owns(r); !ok || got != o1 {
		t.Fatalf("Owns = %v, %v; want the acquired ownership", got, ok)
	}
	if again := mustAcquire(t, s1, r); again != o1 {
		t.Fatal("second Acquire by the holder returned a different ownership")
	}

	_, err := s2.Acquire(tctx(t, 5*time.Second), r)
	var elsewhere lease.OwnedElsewhereError
	if !errors.Is(err, lease.ErrOwnedElsewhere) || !errors.As(err, &elsewhere) || elsewhere.Broker != 1 {
		t.Fatalf("second session's Acquire error = %v; want OwnedElsewhereError{1}", err)
	}
	if _, ok := s2.Owns(r); ok {
		t.Fatal("session 2 owns a resource it failed to acquire")
	}

	if err := s1.Release(tctx(t, 5*time.Second), r); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, ok := s1.Owns(r); ok {
		t.Fatal("session 1 still owns after Release")
	}
	o2 := mustAcquire(t, s2, r)
	if o2.Epoch != 2 || o2.Token <= o1.Token {
		t.Fatalf("after hand-over epoch %d token %d; want epoch 2 and token > %d", o2.Epoch, o2.Token, o1.Token)
	}
	noLoss(t, s1) // a release is not a loss
}

func TestGroupAcquireAndReleaseAll(t *testing.T) {
	_, cli := startEtcd(t)
	s1, s2 := newSession(t, cli, 1), newSession(t, cli, 2)
	rs := []lease.Resource{
		testGroup("g1"),
		testPartition("demo", 1),
		testPartition("demo", 2),
	}
	for _, r := range rs {
		mustAcquire(t, s1, r)
	}
	if err := s1.ReleaseAll(tctx(t, 5*time.Second)); err != nil {
		t.Fatalf("release all: %v", err)
	}
	for _, r := range rs {
		if o := mustAcquire(t, s2, r); o.Epoch != 2 {
			t.Errorf("%s: successor epoch %d, want 2", r.Name, o.Epoch)
		}
	}
}

func TestFencedCommit(t *testing.T) {
	tests := []struct {
		name string
		// interfere makes the holder's next commit stale, directly in etcd
		// or through a second session.
		interfere func(t *testing.T, cli *clientv3.Client, s2 *lease.Session, r lease.Resource)
	}{
		{"stale state revision", func(t *testing.T, cli *clientv3.Client, _ *lease.Session, r lease.Resource) {
			if _, err := cli.Put(tctx(t, 5*time.Second), r.StateKey, "intruder"); err != nil {
				t.Fatal(err)
			}
		}},
		{"stale token", func(t *testing.T, cli *clientv3.Client, s2 *lease.Session, r lease.Resource) {
			// The owner key vanishes (as at server-side expiry) and another
			// broker takes over and commits.
			if _, err := cli.Delete(tctx(t, 5*time.Second), r.OwnerKey); err != nil {
				t.Fatal(err)
			}
			o2 := mustAcquire(t, s2, r)
			if _, err := s2.FencedCommit(tctx(t, 5*time.Second), o2, []byte("intruder")); err != nil {
				t.Fatal(err)
			}
		}},
		{"stale token, state untouched", func(t *testing.T, cli *clientv3.Client, s2 *lease.Session, r lease.Resource) {
			// The successor has not committed yet: only the token differs.
			if _, err := cli.Delete(tctx(t, 5*time.Second), r.OwnerKey); err != nil {
				t.Fatal(err)
			}
			mustAcquire(t, s2, r)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, cli := startEtcd(t)
			s1, s2 := newSession(t, cli, 1), newSession(t, cli, 2)
			r := testPartition("demo", 0)
			extraKey := testStateKey("demo/0/extra")
			o := mustAcquire(t, s1, r)

			rev, err := s1.FencedCommit(tctx(t, 5*time.Second), o, []byte("state-1"))
			if err != nil {
				t.Fatalf("first commit: %v", err)
			}
			if _, modRev, _, _ := get(t, cli, r.StateKey); rev != modRev || o.StateRev != rev || string(o.State) != "state-1" {
				t.Fatalf("commit rev %d, ownership rev %d state %q, etcd mod rev %d", rev, o.StateRev, o.State, modRev)
			}

			tc.interfere(t, cli, s2, r)
			want, before, _, _ := get(t, cli, r.StateKey)
			_, err = s1.FencedCommit(tctx(t, 5*time.Second), o, []byte("stale"), clientv3.OpPut(extraKey, "seg"))
			if !isFenced(err) || errors.Is(err, lease.ErrAmbiguous) {
				t.Fatalf("stale commit error = %v; want ErrFenced", err)
			}
			if val, after, _, _ := get(t, cli, r.StateKey); val != want || after != before {
				t.Fatalf("state after refused commit = %q rev %d; want %q rev %d", val, after, want, before)
			}
			if _, _, _, found := get(t, cli, extraKey); found {
				t.Fatal("extra op of a refused commit was written")
			}
			if l := nextLoss(t, s1, time.Second); only(t, l) != r || !isFenced(l.Reason) {
				t.Fatalf("loss = %+v; want %s fenced", l, r.Name)
			}
			if _, ok := s1.Owns(r); ok {
				t.Fatal("still owns after a fenced commit")
			}
			if _, err := s1.FencedCommit(tctx(t, 5*time.Second), o, []byte("again")); !errors.Is(err, lease.ErrNotOwner) {
				t.Fatalf("commit on a dropped ownership = %v; want ErrNotOwner", err)
			}
		})
	}
}

func TestConcurrentAcquire(t *testing.T) {
	_, cli := startEtcd(t)
	sessions := []*lease.Session{newSession(t, cli, 1), newSession(t, cli, 2), newSession(t, cli, 3)}
	r := testPartition("race", 0)
	const perSession = 4
	type result struct {
		broker int
		o      *lease.Ownership
		err    error
	}
	results := make(chan result, len(sessions)*perSession)
	var wg sync.WaitGroup
	for i, s := range sessions {
		for range perSession {
			wg.Go(func() {
				o, err := s.Acquire(tctx(t, 10*time.Second), r)
				results <- result{i, o, err}
				s.Owns(r) // exercised concurrently for -race
			})
		}
	}
	wg.Wait()
	close(results)
	winners := map[int]*lease.Ownership{}
	for res := range results {
		switch {
		case res.err == nil:
			if prev, ok := winners[res.broker]; ok && prev != res.o {
				t.Errorf("session %d returned two different ownerships", res.broker)
			}
			winners[res.broker] = res.o
		case !errors.Is(res.err, lease.ErrOwnedElsewhere):
			t.Errorf("session %d: unexpected error %v", res.broker, res.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d sessions acquired the same partition, want exactly 1", len(winners))
	}
}

func TestCloseRevokes(t *testing.T) {
	_, cli := startEtcd(t)
	s1 := newSession(t, cli, 1)
	r := testPartition("demo", 0)
	mustAcquire(t, s1, r)
	brokerKey := testLayout.BrokerKey(1)
	if err := s1.Register(tctx(t, 5*time.Second), brokerKey, "b1"); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	for _, k := range []string{r.OwnerKey, brokerKey} {
		if _, _, _, found := get(t, cli, k); found {
			t.Errorf("%s still present after Close", k)
		}
	}
	if _, ok := <-s1.LossReady(); ok {
		t.Error("loss notifications not closed by Close")
	}
	if _, err := s1.Acquire(tctx(t, time.Second), r); !errors.Is(err, lease.ErrClosed) {
		t.Errorf("acquire after close = %v; want ErrClosed", err)
	}
}

// TestAbandonLeavesKeysToExpire: a crashed owner gives nothing back; its
// owner key stays (and keeps others out) until the server expires the lease.
func TestAbandonLeavesKeysToExpire(t *testing.T) {
	_, cli := startEtcd(t)
	s1, s2 := newSession(t, cli, 1), newSession(t, cli, 2)
	r := testPartition("demo", 0)
	first := mustAcquire(t, s1, r)
	s1.Abandon()
	if _, _, _, found := get(t, cli, r.OwnerKey); !found {
		t.Fatal("owner key gone right after Abandon: the lease was revoked")
	}
	if _, err := s2.Acquire(tctx(t, 5*time.Second), r); !errors.Is(err, lease.ErrOwnedElsewhere) {
		t.Fatalf("acquire while the abandoned lease lives = %v; want ErrOwnedElsewhere", err)
	}
	deadline := time.Now().Add(3 * testTTL)
	for {
		o, err := s2.Acquire(tctx(t, 5*time.Second), r)
		if err == nil {
			if o.Epoch <= first.Epoch || o.Token <= first.Token {
				t.Fatalf("successor epoch %d token %d; abandoned had %d %d", o.Epoch, o.Token, first.Epoch, first.Token)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandoned lease not expired after %v: %v", 3*testTTL, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAdoptAfterLostAcquireAnswer(t *testing.T) {
	_, cli := startEtcd(t)
	s := newSession(t, cli, 1)
	r := testPartition("demo", 0)
	// As if an Acquire transaction committed but its answer was lost.
	resp, err := cli.Txn(tctx(t, 5*time.Second)).Then(
		clientv3.OpPut(r.EpochKey, ""),
		clientv3.OpPut(r.OwnerKey, layout.Marshal(layout.Owner{Broker: 1}), clientv3.WithLease(s.LeaseID())),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	o := mustAcquire(t, s, r)
	if o.Token != resp.Header.Revision || o.Epoch != 1 {
		t.Fatalf("adopted token %d epoch %d; want %d, 1", o.Token, o.Epoch, resp.Header.Revision)
	}
	if _, err := s.FencedCommit(tctx(t, 5*time.Second), o, []byte("s")); err != nil {
		t.Fatalf("commit on adopted ownership: %v", err)
	}
}

// TestLossesNeverDropped: many fenced commits and no reader: every loss is
// kept (the old bounded channel dropped all but its capacity), each once.
func TestLossesNeverDropped(t *testing.T) {
	_, cli := startEtcd(t)
	s := newSession(t, cli, 1)
	const n = 40
	for p := range int32(n) {
		r := testPartition("demo", p)
		o := mustAcquire(t, s, r)
		if _, err := cli.Put(tctx(t, 5*time.Second), r.StateKey, "intruder"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FencedCommit(tctx(t, 5*time.Second), o, []byte("x")); !isFenced(err) {
			t.Fatalf("commit %d = %v; want ErrFenced", p, err)
		}
		select {
		case <-o.Lost():
		default:
			t.Fatalf("partition %d: Lost not closed after a fenced commit", p)
		}
	}
	seen := map[string]bool{}
	for _, l := range s.TakeLosses() {
		seen[only(t, l).Name] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct losses kept, want %d", len(seen), n)
	}
	if st := s.Stats(); st.OwnershipsLost != n || st.SessionLosses != 0 {
		t.Fatalf("stats = %+v; want %d ownerships lost, no session loss", st, n)
	}
}

func TestConfigValidation(t *testing.T) {
	_, cli := startEtcd(t)
	tests := []struct {
		name string
		cfg  lease.Config
		ok   bool
	}{
		{"no client", lease.Config{}, false},
		{"margin too large", lease.Config{Client: cli, TTL: 3 * time.Second, SafetyMargin: 2 * time.Second}, false},
		{"defaults", lease.Config{Client: cli}, true},
		{"sub-second TTL rounds up", lease.Config{Client: cli, TTL: 1500 * time.Millisecond}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := lease.NewSession(tctx(t, 10*time.Second), tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("NewSession error = %v, want ok=%v", err, tc.ok)
			}
			if s != nil {
				defer s.Close()
				if !s.Valid() || s.LeaseID() == 0 {
					t.Fatal("new session has no valid lease")
				}
			}
		})
	}
}

func TestRegisterBroker(t *testing.T) {
	_, cli := startEtcd(t)
	s := newSession(t, cli, 7)
	info := layout.BrokerInfo{ID: 7, Addr: "127.0.0.1:9092"}
	if err := s.RegisterBroker(tctx(t, 5*time.Second), info); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(tctx(t, 5*time.Second), testLayout.BrokerKey(7))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(s.LeaseID()) {
		t.Fatalf("broker key = %v, %v; want one key under the session lease", resp, err)
	}
	var got layout.BrokerInfo
	if err := layout.Unmarshal(resp.Kvs[0].Value, &got); err != nil || got != info {
		t.Fatalf("broker info = %+v, %v; want %+v", got, err, info)
	}
	if s.Partition("t", 1, testStateKey("t/1")) != testPartition("t", 1) || s.Group("g", testStateKey("group/g")) != testGroup("g") {
		t.Fatal("session resource helpers disagree with the package functions")
	}
}
