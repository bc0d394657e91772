// Package nemesis injects the fault suite's faults into a running cluster,
// one at a time, rotating through them: kill -9 and restart a broker, pause a
// partition owner past its lease (alone, or frozen together with its etcd
// connections like a paused VM, so that what it already sent arrives late),
// kill and restart an etcd member (the leader too), compact etcd, kill -9 and
// restart a proxy, and cut or delay one broker's traffic to etcd.
//
// The promise: every fault is logged in the history as invoked when it
// starts and completed (ok) when it is healed, or info if healing failed; a
// fault in progress when the run ends is still healed before Run returns.
// Targets and timings come from a seeded generator, so a seed names a
// schedule (process timing still varies).
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/cluster"
	"github.com/kproxy/kproxy/integration/chaos/history"
)

// Kind names a fault.
type Kind string

const (
	KillBroker      Kind = "kill-broker"
	PauseBroker     Kind = "pause-broker"
	FreezeBroker    Kind = "freeze-broker"
	KillEtcd        Kind = "kill-etcd"
	KillEtcdLeader  Kind = "kill-etcd-leader"
	CompactEtcd     Kind = "compact-etcd"
	KillProxy       Kind = "kill-proxy"
	CutBrokerEtcd   Kind = "cut-broker-etcd"
	DelayBrokerEtcd Kind = "delay-broker-etcd"
)

// AllKinds is every fault, in rotation order. Stalls of a partition owner
// (the kafka-flow timeline) come round most often: they are what fencing is
// for.
var AllKinds = []Kind{
	FreezeBroker, KillBroker, PauseBroker, KillEtcdLeader, CutBrokerEtcd,
	CompactEtcd, FreezeBroker, KillProxy, DelayBrokerEtcd, PauseBroker,
	KillEtcd, KillBroker, FreezeBroker, CutBrokerEtcd,
}

// Config configures a Nemesis. Zero values take the defaults in brackets.
type Config struct {
	Cluster    *cluster.Cluster  // required
	Recorder   *history.Recorder // required
	Topic      string            // whose partition owners are targets (required)
	Partitions int32             // [8]
	Kinds      []Kind            // rotation [AllKinds]
	// Each cycle lasts a random time in [IntervalMin, IntervalMax]: the fault
	// is active for its hold time at the start, the rest is quiet [10s, 30s].
	IntervalMin, IntervalMax time.Duration
	// LeaseTTL of the brokers [3s]; a pause or cut lasts longer than
	// LeaseTTL + etcd election timeout (1s) + margin, so a successor takes over.
	LeaseTTL time.Duration
	Seed     uint64
	Logger   *slog.Logger
	// Progress, if set, is told each cycle's number (from 1), its fault and
	// the fault time left.
	Progress func(cycle int, kind Kind, left time.Duration)
}

func (c Config) withDefaults() (Config, error) {
	if c.Cluster == nil || c.Recorder == nil || c.Topic == "" {
		return c, errors.New("nemesis config: Cluster, Recorder and Topic are required")
	}
	if c.Partitions == 0 {
		c.Partitions = 8
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllKinds
	}
	if c.IntervalMin == 0 {
		c.IntervalMin = 10 * time.Second
	}
	if c.IntervalMax < c.IntervalMin {
		c.IntervalMax = max(c.IntervalMin, 30*time.Second)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Nemesis runs faults.
type Nemesis struct {
	cfg Config
	c   *cluster.Cluster
	rng *rand.Rand
	log *slog.Logger
}

// New checks the config.
func New(cfg Config) (*Nemesis, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Nemesis{cfg: cfg, c: cfg.Cluster, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d)), log: cfg.Logger}, nil
}

// Run injects faults for d (or until ctx ends); each is healed before the
// next starts and before Run returns. The last fault keeps its full hold even
// if that ends after d; only ctx cuts holds short. It returns the faults
// injected by kind.
func (n *Nemesis) Run(ctx context.Context, d time.Duration) map[Kind]int {
	counts := map[Kind]int{}
	stop := time.Now().Add(d)
	for i := 0; ctx.Err() == nil && time.Now().Before(stop); i++ {
		cycle := n.between(n.cfg.IntervalMin, n.cfg.IntervalMax)
		end := time.Now().Add(cycle)
		kind := n.cfg.Kinds[i%len(n.cfg.Kinds)]
		if n.cfg.Progress != nil {
			n.cfg.Progress(i+1, kind, time.Until(stop))
		}
		if err := n.inject(ctx, kind); err != nil {
			n.log.Warn("fault not injected", "fault", kind, "err", err)
		} else {
			counts[kind]++
		}
		wait := min(time.Until(end), time.Until(stop))
		select {
		case <-ctx.Done():
		case <-time.After(max(wait, 0)):
		}
	}
	return counts
}

// fault is one injected fault: heal undoes it.
type fault struct {
	target string
	hold   time.Duration
	heal   func(context.Context) error
}

func (n *Nemesis) inject(ctx context.Context, kind Kind) error {
	f, err := n.start(ctx, kind)
	if err != nil {
		return err
	}
	inv := n.cfg.Recorder.Invoke(history.Op{Process: "nemesis", F: history.Fault, Fault: string(kind), Target: f.target})
	n.log.Info("fault", "kind", kind, "target", f.target, "hold", f.hold)
	select {
	case <-ctx.Done():
	case <-time.After(f.hold):
	}
	// Heal even when the run is over: a fault must never outlive the run.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	out := history.Op{Type: history.OK}
	if f.heal != nil {
		if err := f.heal(hctx); err != nil {
			out = history.Op{Type: history.Info, Error: err.Error()}
			n.log.Warn("heal failed", "fault", kind, "target", f.target, "err", err)
		}
	}
	n.cfg.Recorder.Complete(inv, out)
	return nil
}

// between returns a random duration in [lo, hi].
func (n *Nemesis) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// pastLease is how long a broker must be unreachable for its lease to expire
// on the server and a successor to take over.
func (n *Nemesis) pastLease() time.Duration {
	return 2*n.cfg.LeaseTTL + time.Second + n.between(0, 2*time.Second)
}

func (n *Nemesis) start(ctx context.Context, kind Kind) (fault, error) {
	switch kind {
	case KillBroker:
		return n.killBroker(ctx)
	case PauseBroker:
		return n.pauseBroker(ctx)
	case FreezeBroker:
		return n.freezeBroker(ctx)
	case KillEtcd, KillEtcdLeader:
		return n.killEtcd(ctx, kind == KillEtcdLeader)
	case CompactEtcd:
		rev, err := n.c.Compact(ctx)
		if err != nil {
			return fault{}, err
		}
		return fault{target: fmt.Sprintf("revision %d", rev)}, nil
	case KillProxy:
		return n.killProxy(ctx)
	case CutBrokerEtcd:
		return n.relayFault(ctx, false)
	case DelayBrokerEtcd:
		return n.relayFault(ctx, true)
	}
	return fault{}, fmt.Errorf("unknown fault %q", kind)
}
