package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/lease"
)

func benchSession(b *testing.B) (*lease.Session, lease.Resource, *lease.Ownership) {
	_, cli := etcdtest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := lease.NewSession(ctx, lease.Config{Client: cli, Layout: testLayout, BrokerID: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	r := s.Partition("bench", 0, testStateKey("bench/0"))
	o, err := s.Acquire(ctx, r)
	if err != nil {
		b.Fatal(err)
	}
	return s, r, o
}

// Owns is on every produce and fetch: it must stay cheap under parallel load.
func BenchmarkOwnsParallel(b *testing.B) {
	s, r, _ := benchSession(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := s.Owns(r); !ok {
				b.Fatal("lost ownership during benchmark")
			}
		}
	})
}

func BenchmarkFencedCommit(b *testing.B) {
	s, _, o := benchSession(b)
	ctx := context.Background()
	state := make([]byte, 256)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.FencedCommit(ctx, o, state); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireStorm is a cold start: b.N partitions acquired at once by
// one session (the batcher carries them in few transactions).
func BenchmarkAcquireStorm(b *testing.B) {
	s, _, _ := benchSession(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	before := s.Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range b.N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Acquire(ctx, s.Partition("storm", int32(i), testStateKey(fmt.Sprintf("storm/%d", i)))); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	b.ReportMetric(float64(st.TxnItems-before.TxnItems)/float64(max(st.Txns-before.Txns, 1)), "items/txn")
}
