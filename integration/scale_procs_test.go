package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kproxy/kproxy/bench/scale"
)

// TestScaleColdStartProcesses is issue 11's 30,000-partition run in the
// reduced form `make test` runs: one record to each partition (the storm),
// through product processes set up as `make scale` sets them up
// (bench/scale.StartEnv: `kproxy etcd`, 3 `kproxy broker` with the memory
// store and 2 `kproxy serve`), built without -race by testrig.Build.
//
// Why separate processes: under -race, as `make test` runs, the race
// detector's CPU cost made the in-process cluster about ten times slower, and
// 30,000 partitions did not fit on this 2-core machine. The race detector
// stays on this test's own process (the kgo clients); the product processes
// are what a user runs, and the same code paths run under -race in
// TestScaleColdStart's in-process form.
func TestScaleColdStartProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and acquires 30,000 partitions")
	}
	start := time.Now()
	bin := buildKproxy(t)
	built := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	e, err := scale.StartEnv(ctx, scale.EnvConfig{Dir: t.TempDir(), Kproxy: bin, Brokers: 3, Proxies: 2, Name: "procs"})
	if err != nil {
		t.Fatalf("start etcd, brokers and proxies: %v", err)
	}
	t.Cleanup(e.Close)
	t.Cleanup(func() { // before Close: the logs are removed with dir
		if t.Failed() {
			for _, b := range e.Rig().Brokers {
				t.Logf("broker %d log ends:\n%s", b.ID, b.Proc.Tail())
			}
			for _, p := range e.Rig().Proxies {
				t.Logf("%s log ends:\n%s", p.Proc.Name(), p.Proc.Tail())
			}
		}
	})
	t.Logf("built kproxy in %v; processes ready in %v", built, time.Since(start)-built)
	rig := e.Rig()
	const topic = "scale"
	coldStart{seeds: rig.ProxyAddrs(), topic: topic, parts: 30_000, delivery: 60 * time.Second,
		topicReady: func(ctx context.Context) error { return e.WaitTopic(ctx, topic, 30*time.Second) },
		sessionLosses: func(ctx context.Context) (map[int32]float64, error) {
			out := map[int32]float64{}
			var errs error
			for _, b := range rig.Brokers {
				l, err := scale.ReadLosses(ctx, b.MetricsAddr)
				if err == nil && !l.SessionCounter {
					err = fmt.Errorf("%s is absent, so its losses are unknown", scale.SessionLossSeries)
				}
				if err != nil {
					errs = errors.Join(errs, fmt.Errorf("broker %d: %w", b.ID, err))
					continue
				}
				t.Logf("broker %d: %.0f session losses, %.0f ownerships lost without release", b.ID, l.Sessions, l.Ownerships)
				out[b.ID] = l.Sessions
			}
			return out, errs
		}}.run(ctx, t)
}
