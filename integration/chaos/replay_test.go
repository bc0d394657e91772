package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/integration/chaos/checker"
	"github.com/kproxy/kproxy/integration/chaos/history"
	"github.com/kproxy/kproxy/integration/chaos/workload"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
	"github.com/kproxy/kproxy/testkit/faultnet"
)

// The seed replays: deterministic, in-process timelines of the bugs that
// started the project (docs/background.md), each read back and checked with
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

// TestReplayKafScaleRace: the first produces to fresh partitions race, sent
// at once straight to two brokers and through both proxies. Only one broker
// may write each partition, and offsets stay unique.
func TestReplayKafScaleRace(t *testing.T) {
	const topic, partitions, perSource = "race", 4, 10
	c := devtest.Start(t, devcluster.Config{Brokers: 3, Proxies: 2, LeaseTTL: replayTTL, DefaultPartitions: partitions,
		AutoCreateTopics: true, StoreMemory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Through each proxy: a proxy answers UNKNOWN_TOPIC_OR_PARTITION until
	// its etcd watch has the topic, and this replay is about brokers racing.
	for _, px := range c.ProxyAddrs() {
		if err := workload.EnsureTopic(ctx, px, topic, partitions); err != nil {
			t.Fatal(err)
		}
	}
	ids := c.BrokerIDs()
	sources := []*direct{
		dialDirect(t, c.BrokerAddr(ids[0])), dialDirect(t, c.BrokerAddr(ids[1])),
		dialDirect(t, c.ProxyAddrs()[0]), dialDirect(t, c.ProxyAddrs()[1]),
	}
	names := []string{"broker-a", "broker-b", "proxy-1", "proxy-2"}
	rec := history.NewRecorder(nil, nil)
	for p := range int32(partitions) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range sources {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range int64(perSource) {
					d.send(ctx, rec, names[i], topic, p, k+1, fmt.Sprintf("race-%d-%s-%d", p, names[i], k))
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if err := workload.FinalRead(ctx, rec, c.ProxyAddrs(), topic, partitions, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	mustValid(t, checker.Check(rec.Ops(), checker.Options{}))

	acked := map[string]map[int32]int{}
	for _, pr := range pairs(rec) {
		if pr.Outcome() == history.OK {
			if acked[pr.Invoke.Process] == nil {
				acked[pr.Invoke.Process] = map[int32]int{}
			}
			acked[pr.Invoke.Process][pr.Invoke.Partition]++
		}
	}
	for p := range int32(partitions) {
		if acked["broker-a"][p] > 0 && acked["broker-b"][p] > 0 {
			t.Errorf("partition %d: both brokers acknowledged writes (%d and %d) with no fault in between",
				p, acked["broker-a"][p], acked["broker-b"][p])
		}
		for _, px := range []string{"proxy-1", "proxy-2"} {
			if acked[px][p] != perSource {
				t.Errorf("partition %d: %s acknowledged %d of %d sends; the proxy should route to the owner",
					p, px, acked[px][p], perSource)
			}
		}
	}
}

func pairs(rec *history.Recorder) []history.Pair {
	ps, _ := history.Pairs(rec.Ops())
	return ps
}

// TestReplayKafScaleTakeover: a broker that does not own a partition serves
// a fetch of it (in KafScale that cached the log forever), the owner writes
// more and is killed, and the fetching broker takes over: it must continue
// at the committed end offset, not at what it saw.
func TestReplayKafScaleTakeover(t *testing.T) {
	const topic = "takeover"
	c := devtest.Start(t, devcluster.Config{Brokers: 3, Proxies: 2, LeaseTTL: replayTTL, DefaultPartitions: 1,
		AutoCreateTopics: true, StoreMemory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := workload.EnsureTopic(ctx, c.ProxyAddrs()[0], topic, 1); err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(nil, nil)
	px := dialDirect(t, c.ProxyAddrs()[0])
	sendOK := func(d *direct, proc string, seq int64) int64 {
		t.Helper()
		base, code, err := d.send(ctx, rec, proc, topic, 0, seq, fmt.Sprintf("%s-%d", proc, seq))
		if err != nil || code != 0 {
			t.Fatalf("%s send %d: code %d err %v", proc, seq, code, err)
		}
		return base
	}
	for i := range int64(5) {
		sendOK(px, "client", i+1)
	}
	owner, ok, err := c.Owner(ctx, topic, 0)
	if err != nil || !ok {
		t.Fatalf("owner after 5 produces: %d %t %v", owner, ok, err)
	}
	var other int32
	for _, id := range c.BrokerIDs() {
		if id != owner {
			other = id
			break
		}
	}
	dx := dialDirect(t, c.BrokerAddr(other))
	// The non-owner serves its committed view, which its etcd watch feeds:
	// it may lag the acknowledgement briefly, so read until it holds all 5.
	seen := time.Now().Add(10 * time.Second)
	for {
		recs, code, err := dx.fetch(ctx, topic, 0, 0)
		if err == nil && code == 0 && len(recs) == 5 {
			break
		}
		if time.Now().After(seen) {
			t.Fatalf("fetch from non-owner %d: %d records, code %d, err %v", other, len(recs), code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range int64(5) { // the owner moves on; the non-owner saw only 5
		sendOK(px, "client", i+6)
	}
	if err := c.KillBroker(owner); err != nil {
		t.Fatal(err)
	}
	// The non-owner takes over once the dead owner's lease expires.
	var first int64 = -1
	deadline := time.Now().Add(10 * replayTTL)
	for seq := int64(1); first < 0; seq++ {
		base, code, err := dx.send(ctx, rec, "successor", topic, 0, seq, fmt.Sprintf("successor-%d", seq))
		switch {
		case err == nil && code == 0:
			first = base
		case time.Now().After(deadline):
			t.Fatalf("broker %d did not take over within %s: code %d err %v", other, 10*replayTTL, code, err)
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	if first != 10 {
		t.Errorf("successor's first offset = %d, want 10 (the committed end offset)", first)
	}
	if now, _, _ := c.Owner(ctx, topic, 0); now != other {
		t.Errorf("owner = %d, want the successor %d", now, other)
	}
	for i := range int64(3) {
		sendOK(px, "client", i+11)
	}
	if err := workload.FinalRead(ctx, rec, c.ProxyAddrs(), topic, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	mustValid(t, checker.Check(rec.Ops(), checker.Options{}))
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

// open lets a held commit go on; it may be called more than once.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

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

// flow is the kafka-flow replay's setup: broker a reaches etcd only through
// a relay and can be stopped before a commit; broker b is its successor.
type flow struct {
	relay  *faultnet.Relay
	cliA   *clientv3.Client
	gate   *gate
	a, b   *broker.Broker
	da, db *direct
	rec    *history.Recorder
}

func newFlow(t *testing.T, ctx context.Context, topic string, disableFencing bool) *flow {
	t.Helper()
	srv, _ := etcdtest.Start(t)
	relay, err := faultnet.NewRelay("127.0.0.1:0", strings.TrimPrefix(srv.Endpoint, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	cliA, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + relay.Addr()}, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cliA.Close() })
	g := newGate()
	t.Cleanup(g.open)
	st := store.NewMemory()
	f := &flow{relay: relay, cliA: cliA, gate: g, rec: history.NewRecorder(nil, nil)}
	f.a = startBroker(t, ctx, broker.Config{ID: 1, Etcd: cliA, Store: st, LeaseTTL: replayTTL, AutoCreateTopics: true,
		DefaultPartitions: 1, DisableFencing: disableFencing, Failpoints: &broker.Failpoints{BeforeCommit: g.hook}})
	f.b = startBroker(t, ctx, broker.Config{ID: 2, Etcd: etcdtest.NewClient(t, srv.Endpoint), Store: st,
		LeaseTTL: replayTTL, AutoCreateTopics: true, DefaultPartitions: 1, DisableFencing: disableFencing})
	if err := workload.EnsureTopic(ctx, f.a.Addr(), topic, 1); err != nil {
		t.Fatal(err)
	}
	f.da, f.db = dialDirect(t, f.a.Addr()), dialDirect(t, f.b.Addr())
	return f
}

// mustSend sends through d and fails the test unless it is acknowledged.
func (f *flow) mustSend(t *testing.T, ctx context.Context, d *direct, proc, topic string, seq int64, value string) {
	t.Helper()
	if _, code, err := d.send(ctx, f.rec, proc, topic, 0, seq, value); err != nil || code != 0 {
		t.Fatalf("%s send %q: code %d err %v", proc, value, code, err)
	}
}

// takeOver sends to b until it owns the partition (a's lease expired).
func (f *flow) takeOver(t *testing.T, ctx context.Context, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * replayTTL)
	for seq := int64(1); ; seq++ {
		_, code, err := f.db.send(ctx, f.rec, "successor-b", topic, 0, seq, fmt.Sprintf("b-try-%d", seq))
		if err == nil && code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker b did not take over within %s: code %d err %v", 10*replayTTL, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kafkaFlow(t *testing.T, disableFencing bool) (checker.Result, int16, error) {
	const topic = "flow"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := newFlow(t, ctx, topic, disableFencing)
	for i := range int64(3) {
		f.mustSend(t, ctx, f.da, "owner-a", topic, i+1, fmt.Sprintf("a-%d", i))
	}

	// A's next append stops just before its commit; then A loses etcd.
	f.gate.arm()
	type result struct {
		code int16
		err  error
	}
	stale := make(chan result, 1)
	go func() {
		_, code, err := f.da.send(ctx, f.rec, "owner-a", topic, 0, 4, "a-stale")
		stale <- result{code, err}
	}()
	select {
	case <-f.gate.entered:
	case <-ctx.Done():
		t.Fatal("broker a never reached its commit")
	}
	f.relay.Cut()

	// B takes over once A's lease has expired on the server, and writes.
	f.takeOver(t, ctx, topic)
	for i := range int64(2) {
		f.mustSend(t, ctx, f.db, "successor-b", topic, 100+i, fmt.Sprintf("b-%d", i))
	}

	// A comes back and tries to commit what it prepared while it owned.
	f.relay.Heal()
	waitEtcd(t, ctx, f.cliA)
	f.gate.open()
	var r result
	select {
	case r = <-stale:
	case <-ctx.Done():
		t.Fatal("stale produce never answered")
	}
	if _, code, err := f.db.send(ctx, f.rec, "successor-b", topic, 0, 200, "b-after"); err != nil || code != 0 {
		t.Logf("successor b after a's attempt: code %d err %v", code, err)
	}
	if err := workload.FinalRead(ctx, f.rec, []string{f.b.Addr()}, topic, 1, 30*time.Second); err != nil && !disableFencing {
		t.Fatal(err)
	}
	return checker.Check(f.rec.Ops(), checker.Options{}), r.code, r.err
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
