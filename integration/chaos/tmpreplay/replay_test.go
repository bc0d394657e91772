package tmpreplay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/broker-stub/broker"
	"github.com/kproxy/kproxy/broker-stub/store"
	"github.com/kproxy/kproxy/integration/chaos/checker"
	"github.com/kproxy/kproxy/integration/chaos/history"
	"github.com/kproxy/kproxy/integration/chaos/workload"
	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/internal/faultnet"
)

// The seed replays: deterministic, in-process timelines of the bugs in
// shared/context that started the project, each read back and checked with
// the same checker as the fault suite.

const replayTTL = 2 * time.Second

func mustValid(t *testing.T, res checker.Result) {
	t.Helper()
	t.Logf("check: %s", res)
	if !res.Valid {
		for _, an := range res.Anomalies {
			t.Errorf("%s: %s (ops %v)", an.Kind, an.Detail, an.Ops)
		}
	}
}

// gate blocks one commit of a broker in its BeforeCommit failpoint.
type gate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

func (g *gate) hook(string, int32) {
	g.mu.Lock()
	hit := g.armed
	g.armed = false
	g.mu.Unlock()
	if !hit {
		return
	}
	close(g.entered)
	select {
	case <-g.release:
	case <-time.After(60 * time.Second): // never hold a broker forever
	}
}

// TestReplayKafkaFlow is the kafka-flow timeline: the owner is cut off from
// etcd past its lease in the middle of an append, a successor takes over and
// writes, then the old owner comes back and tries to commit. With fencing
// its commit is refused and its client gets NOT_LEADER_OR_FOLLOWER; with
// fencing disabled (the mutation) the same timeline must show up as lost
// writes or inconsistent offsets.
func TestReplayKafkaFlow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable bool
	}{{"fenced", false}, {"mutation", true}} {
		t.Run(tc.name, func(t *testing.T) {
			res, staleCode, staleErr := kafkaFlow(t, tc.disable)
			if !tc.disable {
				if staleErr != nil || staleCode != kerr.NotLeaderForPartition.Code {
					t.Errorf("stale owner's produce: code %d (%v), err %v; want NOT_LEADER_OR_FOLLOWER",
						staleCode, kerr.ErrorForCode(staleCode), staleErr)
				}
				mustValid(t, res)
				return
			}
			t.Logf("mutation: %s", res)
			if res.Counts[checker.LostWrite]+res.Counts[checker.InconsistentOffsets] == 0 {
				t.Errorf("fencing disabled, yet the checker found no lost write or inconsistent offset (stale code %d, err %v)",
					staleCode, staleErr)
			}
		})
	}
}

func kafkaFlow(t *testing.T, disableFencing bool) (checker.Result, int16, error) {
	const topic = "flow"
	srv, _ := etcdlocal.StartForTest(t)
	relay, err := faultnet.NewRelay("127.0.0.1:0", strings.TrimPrefix(srv.Endpoint, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	cliA, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + relay.Addr()}, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cliA.Close() })
	cliB := etcdlocal.NewClientForTest(t, srv.Endpoint)
	st := store.NewMemory()
	g := newGate()
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	a := startBroker(t, ctx, broker.Config{ID: 1, Etcd: cliA, Store: st, LeaseTTL: replayTTL, AutoCreateTopics: true,
		DefaultPartitions: 1, DisableFencing: disableFencing, Failpoints: &broker.Failpoints{BeforeCommit: g.hook}})
	b := startBroker(t, ctx, broker.Config{ID: 2, Etcd: cliB, Store: st, LeaseTTL: replayTTL, AutoCreateTopics: true,
		DefaultPartitions: 1, DisableFencing: disableFencing})
	if err := workload.EnsureTopic(ctx, a.Addr(), topic, 1); err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(nil, nil)
	da, db := dialDirect(t, a.Addr()), dialDirect(t, b.Addr())
	for i := range int64(3) {
		if _, code, err := da.send(ctx, rec, "owner-a", topic, 0, i+1, fmt.Sprintf("a-%d", i)); err != nil || code != 0 {
			t.Fatalf("owner a send %d: code %d err %v", i, code, err)
		}
	}

	// A's next append stops just before its commit; then A loses etcd.
	g.arm()
	type result struct {
		code int16
		err  error
	}
	stale := make(chan result, 1)
	go func() {
		_, code, err := da.send(ctx, rec, "owner-a", topic, 0, 4, "a-stale")
		stale <- result{code, err}
	}()
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("broker a never reached its commit")
	}
	relay.Cut()

	// B takes over once A's lease has expired on the server, and writes.
	deadline := time.Now().Add(10 * replayTTL)
	for seq := int64(1); ; seq++ {
		_, code, err := db.send(ctx, rec, "successor-b", topic, 0, seq, fmt.Sprintf("b-try-%d", seq))
		if err == nil && code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker b did not take over within %s: code %d err %v", 10*replayTTL, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range int64(2) {
		if _, code, err := db.send(ctx, rec, "successor-b", topic, 0, 100+i, fmt.Sprintf("b-%d", i)); err != nil || code != 0 {
			t.Fatalf("successor b send %d: code %d err %v", i, code, err)
		}
	}

	// A comes back and tries to commit what it prepared while it owned.
	relay.Heal()
	waitEtcd(t, ctx, cliA)
	close(g.release)
	var r result
	select {
	case r = <-stale:
	case <-ctx.Done():
		t.Fatal("stale produce never answered")
	}
	if _, code, err := db.send(ctx, rec, "successor-b", topic, 0, 200, "b-after"); err != nil || code != 0 {
		t.Logf("successor b after a's attempt: code %d err %v", code, err)
	}
	if err := workload.FinalRead(ctx, rec, []string{b.Addr()}, topic, 1, 30*time.Second); err != nil && !disableFencing {
		t.Fatal(err)
	}
	return checker.Check(rec.Ops(), checker.Options{}), r.code, r.err
}

func startBroker(t *testing.T, ctx context.Context, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.New(ctx, cfg)
	if err != nil {
		t.Fatalf("broker %d: %v", cfg.ID, err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("broker %d did not stop", cfg.ID)
		}
	})
	return b
}

// waitEtcd waits until cli answers again after a cut.
func waitEtcd(t *testing.T, ctx context.Context, cli *clientv3.Client) {
	t.Helper()
	for i := 0; ; i++ {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(gctx, "/kproxy/ping")
		cancel()
		if err == nil {
			return
		}
		if i == 100 {
			t.Fatalf("etcd unreachable through the healed relay: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
