package quota

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
)

type replica struct {
	m    *Manager
	s    *Store
	stop func()
}

// startReplica runs a Store for one replica until the test ends or stop.
func startReplica(t *testing.T, endpoint, id string) *replica {
	t.Helper()
	cli := etcdtest.NewClient(t, endpoint)
	m := must(New(Config{}))
	s, err := NewStore(StoreConfig{Client: cli, Layout: layout.New(""), Manager: m, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx); err != nil {
			t.Errorf("store %s: %v", id, err)
		}
	})
	var once sync.Once
	r := &replica{m: m, s: s, stop: func() { once.Do(func() { cancel(); wg.Wait() }) }}
	t.Cleanup(r.stop)
	return r
}

// waitFor polls cond (cheap, in memory) until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestAlterReachesOtherReplica: a quota written through one replica is in
// force on another within a second; both count each other, and a replica
// that stops stops counting.
func TestAlterReachesOtherReplica(t *testing.T) {
	srv, _ := etcdtest.Start(t)
	a := startReplica(t, srv.Endpoint, "a")
	b := startReplica(t, srv.Endpoint, "b")
	waitFor(t, 5*time.Second, "both replicas registered", func() bool { return a.m.Replicas() == 2 && b.m.Replicas() == 2 })

	ctx := context.Background()
	alice := Entity{User: Named("alice/with slash"), Client: DefaultPart()}
	if err := a.s.Alter(ctx, alice, []Op{{Type: ProducerByteRate, Value: 2048}, {Type: RequestPercentage, Value: 50}}); err != nil {
		t.Fatal(err)
	}
	// Alter waits for the writer's own view: no polling on that replica.
	if m := a.m.Table().Lookup("alice/with slash", "any")[ProducerByteRate]; !m.OK || m.Limit != 2048 {
		t.Fatalf("right after Alter the writing replica has %+v, want limit 2048", m)
	}
	took := waitFor(t, time.Second, "quota on the other replica", func() bool {
		m := b.m.Table().Lookup("alice/with slash", "any")[ProducerByteRate]
		return m.OK && m.Limit == 2048
	})
	t.Logf("quota in force on the other replica after %v", took)
	if got := b.m.EffectiveLimit(ProducerByteRate, 2048); got != 1024 {
		t.Fatalf("effective limit with 2 replicas %v, want 1024", got)
	}

	if err := a.s.Alter(ctx, alice, []Op{{Type: ProducerByteRate, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "removed quota on the other replica", func() bool {
		m := b.m.Table().Lookup("alice/with slash", "any")
		return !m[ProducerByteRate].OK && m[RequestPercentage].Limit == 50
	})
	if err := a.s.Alter(ctx, alice, []Op{{Type: RequestPercentage, Remove: true}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "entity gone", func() bool { return len(b.m.Table().Entries()) == 0 })

	b.stop()
	waitFor(t, 5*time.Second, "stopped replica no longer counted", func() bool { return a.m.Replicas() == 1 })
}

// TestAlterConcurrent: changes to one entity from many writers all land.
func TestAlterConcurrent(t *testing.T) {
	srv, _ := etcdtest.Start(t)
	a := startReplica(t, srv.Endpoint, "a")
	e := Entity{Client: Named("c")}
	var wg sync.WaitGroup
	for i := range NumTypes {
		wg.Go(func() {
			if err := a.s.Alter(context.Background(), e, []Op{{Type: i, Value: float64(i + 1)}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, time.Second, "all three quotas", func() bool {
		l, ok := a.m.Table().Entries()[e]
		return ok && l.Has == [NumTypes]bool{true, true, true} && fmt.Sprint(l.Value) == "[1 2 3]"
	})
}
