package lease_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/lease"
)

// TestBatchedAcquireMixed: many concurrent acquisitions travel in few
// transactions, and each partition gets its own answer even when some of a
// batch are held by another broker.
func TestBatchedAcquireMixed(t *testing.T) {
	_, cli := startEtcd(t)
	other, s := newSession(t, cli, 2), newSession(t, cli, 1)
	const n = 300
	res := func(p int) lease.Resource { return testPartition("mixed", int32(p)) }
	for p := 0; p < n; p += 3 { // every third partition is taken
		mustAcquire(t, other, res(p))
	}
	before := s.Stats()
	var wg sync.WaitGroup
	errs := make([]error, n)
	owns := make([]*lease.Ownership, n)
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owns[p], errs[p] = s.Acquire(tctx(t, 20*time.Second), res(p))
		}()
	}
	wg.Wait()
	tokens := map[int64]bool{}
	for p := range n {
		switch {
		case p%3 == 0:
			var oe lease.OwnedElsewhereError
			if !errors.As(errs[p], &oe) || oe.Broker != 2 {
				t.Fatalf("partition %d held by broker 2: acquire = %v, want OwnedElsewhere(2)", p, errs[p])
			}
		case errs[p] != nil:
			t.Fatalf("partition %d free: acquire = %v", p, errs[p])
		default:
			_, _, createRev, found := get(t, cli, res(p).OwnerKey)
			if !found || createRev != owns[p].Token || owns[p].Epoch != 1 {
				t.Fatalf("partition %d: token %d epoch %d, owner key create rev %d found %v", p, owns[p].Token, owns[p].Epoch, createRev, found)
			}
			tokens[owns[p].Token] = true
		}
	}
	st := s.Stats()
	txns, items := st.Txns-before.Txns, st.TxnItems-before.TxnItems
	if items != n || txns >= n/2 {
		t.Fatalf("%d acquisitions in %d transactions (%d items); want batching (fewer than %d)", n, txns, items, n/2)
	}
	if len(tokens) >= n/2 {
		t.Fatalf("%d distinct fencing tokens for %d acquisitions: not batched", len(tokens), 2*n/3)
	}
	t.Logf("%d acquisitions in %d transactions", n, txns)
}

// TestBatchedCommitOwnRefusal: commits of several partitions ready together
// share a transaction; the one whose own compare fails is fenced, the
// others commit.
func TestBatchedCommitOwnRefusal(t *testing.T) {
	_, cli := startEtcd(t)
	s := newSession(t, cli, 1)
	const n = 60
	owns := make([]*lease.Ownership, n)
	for p := range n {
		owns[p] = mustAcquire(t, s, testPartition("commits", int32(p)))
	}
	const victim = 17
	if _, err := cli.Put(tctx(t, 5*time.Second), owns[victim].Resource.StateKey, "intruder"); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[p] = s.FencedCommit(tctx(t, 20*time.Second), owns[p], fmt.Appendf(nil, "state-%d", p))
		}()
	}
	wg.Wait()
	for p := range n {
		val, rev, _, _ := get(t, cli, owns[p].Resource.StateKey)
		switch {
		case p == victim:
			if !isFenced(errs[p]) || val != "intruder" {
				t.Fatalf("victim: commit = %v, state %q; want ErrFenced and the intruder's state", errs[p], val)
			}
		case errs[p] != nil || val != fmt.Sprintf("state-%d", p) || rev != owns[p].StateRev:
			t.Fatalf("partition %d: commit = %v, state %q rev %d (ownership rev %d)", p, errs[p], val, rev, owns[p].StateRev)
		}
	}
	if l := nextLoss(t, s, time.Second); only(t, l) != owns[victim].Resource {
		t.Fatalf("loss = %+v; want only the victim", l)
	}
	st := s.Stats()
	t.Logf("%d commits in %d transactions", n, st.Txns-before.Txns)
	if st.Txns-before.Txns >= n {
		t.Fatalf("%d commits took %d transactions: not batched", n, st.Txns-before.Txns)
	}
}

// TestKeepaliveOwnConnection: with EtcdConfig the session keeps its lease on
// its own connection, so a stalled bulk connection cannot starve it.
func TestKeepaliveOwnConnection(t *testing.T) {
	srv, direct := startEtcd(t)
	rl := newRelay(t, srv.Endpoint[len("http://"):])
	bulk := etcdtest.NewClient(t, rl.Endpoint())
	s, err := lease.NewSession(tctx(t, 10*time.Second), lease.Config{
		Client: bulk, Layout: testLayout, BrokerID: 1, TTL: testTTL, SafetyMargin: testMargin,
		EtcdConfig: &clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r := testPartition("ka", 0)
	mustAcquire(t, s, r)
	id := s.LeaseID()
	rl.Pause()
	defer rl.Resume()
	stalled := time.Now()
	for time.Since(stalled) < 2*testTTL {
		if _, ok := s.Owns(r); !ok || s.LeaseID() != id {
			t.Fatalf("lost the lease %v after the bulk connection stalled", time.Since(stalled))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, _, found := get(t, direct, r.OwnerKey); !found {
		t.Fatal("owner key expired on the server while keepalives had their own connection")
	}
	if st := s.Stats(); st.SessionLosses != 0 {
		t.Fatalf("stats = %+v; want no session loss", st)
	}
}

func TestOverloadIsDefinite(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"too many requests", rpctypes.ErrTooManyRequests, lease.ErrOverloaded},
		{"grpc too many requests", rpctypes.ErrGRPCRequestTooManyRequests, lease.ErrOverloaded},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "slow down"), lease.ErrOverloaded},
		{"request timed out", rpctypes.ErrTimeout, lease.ErrAmbiguous},
		{"unavailable", status.Error(codes.Unavailable, "gone"), lease.ErrAmbiguous},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := lease.Classify(tc.err)
			if !errors.Is(got, tc.want) || (tc.want == lease.ErrOverloaded) == errors.Is(got, lease.ErrAmbiguous) {
				t.Fatalf("classify(%v) = %v; want %v only", tc.err, got, tc.want)
			}
		})
	}
}
