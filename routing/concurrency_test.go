package routing

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReadsDuringWrites runs readers against every read method
// while one writer applies every kind of write; -race checks the memory
// model, the assertions check that readers only ever see values the writer
// wrote.
func TestConcurrentReadsDuringWrites(t *testing.T) {
	tb := NewTable()
	const brokers, topics, parts, rounds = 8, 4, 16, 300
	for id := range int32(brokers) {
		tb.SetBroker(Broker{ID: id, Addr: fmt.Sprint(id)})
	}
	var stop atomic.Bool
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("t%d", (i+r)%topics)
				p := int32(i % parts)
				o, e, owned := tb.Owner(name, p)
				if owned && (o < 0 || o >= brokers) {
					fail(fmt.Errorf("Owner(%s,%d) = %d, not a broker the writer set", name, p, o))
				}
				if e < -1 || e > rounds {
					fail(fmt.Errorf("Epoch(%s,%d) = %d out of range", name, p, e))
				}
				if b, ok := tb.Route(name, p, int32(i%brokers)); ok && (b < 0 || b >= brokers || b == int32(i%brokers)) {
					fail(fmt.Errorf("Route(%s,%d) = %d", name, p, b))
				}
				tb.Coordinator(fmt.Sprintf("g%d", i%10))
				tb.RouteGroup("g", -1)
				tb.AnyBroker("k", -1)
				tb.Topic(name)
				if i%50 == 0 {
					tb.Topics()
					tb.Brokers()
					tb.Snapshot()
					tb.Len()
				}
				if i%20 == 0 {
					select {
					case <-tb.Changed():
					case <-stopped:
					}
				}
			}
		}()
	}
	for i := range rounds {
		name := fmt.Sprintf("t%d", i%topics)
		tb.SetTopic(topic(name, int32(parts/2+i%(parts/2+1))))
		for p := range int32(parts) {
			tb.SetOwner(name, p, int32((i+int(p))%brokers))
			tb.SetEpoch(name, p, int32(i))
		}
		tb.SetCoordinator(fmt.Sprintf("g%d", i%10), int32(i%brokers))
		switch i % 25 {
		case 5:
			tb.DeleteBroker(int32(i % brokers))
		case 6:
			tb.SetBroker(Broker{ID: int32((i - 1) % brokers), Addr: "back"})
		case 10:
			tb.DeleteTopic(name)
		case 15:
			tb.DeleteOwner(name, 0)
			tb.DeleteCoordinator("g1")
		case 20:
			b := NewBuilder()
			for id := range int32(brokers) {
				b.SetBroker(Broker{ID: id, Addr: "replaced"})
			}
			b.SetTopic(topic(name, parts))
			tb.Replace(b)
		}
	}
	stop.Store(true)
	close(stopped) // release readers waiting on Changed
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReplaceIsAtomic alternates two complete tables; in each, every
// partition is owned by a live broker. A reader that saw a mix of the two
// (a half-built table) would find an owner that is not live.
func TestReplaceIsAtomic(t *testing.T) {
	const parts = 64
	build := func(id int32) *Builder {
		b := NewBuilder()
		b.SetBroker(Broker{ID: id, Addr: fmt.Sprint(id)})
		b.SetTopic(topic("t", parts))
		for p := range int32(parts) {
			b.SetOwner("t", p, id)
			b.SetEpoch("t", p, id)
		}
		b.SetCoordinator("g", id)
		return b
	}
	tb := NewTable()
	tb.Replace(build(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Int64
	var reads atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				p := int32(i % parts)
				o, e, owned := tb.Owner("t", p)
				if !owned || o != e {
					bad.Add(1)
				}
				if r, ok := tb.Route("t", p, -1); !ok || (r != 1 && r != 2) {
					bad.Add(1)
				}
				if _, owned := tb.Coordinator("g"); !owned {
					bad.Add(1)
				}
				reads.Add(1)
			}
		}()
	}
	for i := range 2000 {
		tb.Replace(build(int32(i%2 + 1)))
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d of %d reads saw a half-built table", bad.Load(), reads.Load())
	}
	if reads.Load() == 0 {
		t.Fatal("readers never ran")
	}
}

// TestOwnerAndEpochTogether: a reader never sees a partition's owner with
// another owner's epoch while SetOwnerAndEpoch moves it between owners.
func TestOwnerAndEpochTogether(t *testing.T) {
	tab := NewTable()
	tab.SetTopic(Topic{Name: "t", Partitions: 1})
	tab.SetOwnerAndEpoch("t", 0, 1, 10)
	const rounds = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range int32(rounds) {
			b := i%3 + 1
			tab.SetOwnerAndEpoch("t", 0, b, b*10)
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		if o, e, _ := tab.Owner("t", 0); e != o*10 { // owned or not (no broker is live here)
			t.Fatalf("read %d: owner %d with epoch %d (want %d)", n, o, e, o*10)
		}
	}
}
