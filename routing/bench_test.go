package routing

import (
	"fmt"
	"runtime"
	"testing"
)

// Benchmarks at the scale the brief sets: 100,000 partitions (1,000 topics of
// 100) and 1,000 live brokers, every partition owned.
const (
	benchTopics     = 1000
	benchPartitions = 100
	benchBrokers    = 1000
	benchGroups     = 10000
)

var benchNames = func() []string {
	n := make([]string, benchTopics)
	for i := range n {
		n[i] = fmt.Sprintf("orders-events-%04d", i)
	}
	return n
}()

func benchBuilder() *Builder {
	b := NewBuilder()
	for id := range int32(benchBrokers) {
		b.SetBroker(Broker{ID: id, Addr: fmt.Sprintf("broker-%d.internal:9092", id), Rack: "r"})
	}
	i := int32(0)
	for _, name := range benchNames {
		b.SetTopic(Topic{Name: name, Partitions: benchPartitions})
		for p := range int32(benchPartitions) {
			b.SetOwner(name, p, i%benchBrokers)
			b.SetEpoch(name, p, 1)
			i++
		}
	}
	for g := range benchGroups {
		b.SetCoordinator(fmt.Sprintf("group-%d", g), int32(g%benchBrokers))
	}
	return b
}

// benchKey spreads iteration i over all 100,000 partitions.
func benchKey(i int) (string, int32) {
	return benchNames[i%benchTopics], int32(i/benchTopics) % benchPartitions
}

func benchTable() *Table {
	tb := NewTable()
	tb.Replace(benchBuilder())
	return tb
}

func BenchmarkOwner(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, ok := tb.Owner(benchKey(i)); !ok {
			b.Fatal("not owned")
		}
		i++
	}
}

func BenchmarkRoute(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name, p := benchKey(i)
		if _, ok := tb.Route(name, p, -1); !ok {
			b.Fatal("no route")
		}
		i++
	}
}

// BenchmarkRouteParallel reads from all cores while nothing writes.
func BenchmarkRouteParallel(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			name, p := benchKey(i)
			tb.Route(name, p, -1)
			i++
		}
	})
}

// BenchmarkRouteFallback is the slow path: the owner is avoided, so Route
// scores all 1,000 brokers (rendezvous).
func BenchmarkRouteFallback(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name, p := benchKey(i)
		owner, _, _ := tb.Owner(name, p)
		if r, ok := tb.Route(name, p, owner); !ok || r == owner {
			b.Fatal("bad fallback")
		}
		i++
	}
}

func BenchmarkRouteGroup(b *testing.B) {
	tb := benchTable()
	groups := make([]string, benchGroups)
	for g := range groups {
		groups[g] = fmt.Sprintf("group-%d", g)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := tb.RouteGroup(groups[i%benchGroups], -1); !ok {
			b.Fatal("no route")
		}
		i++
	}
}

// benchMove is the i-th ownership change: every pass over the partitions
// gives each a different owner than the pass before.
func benchMove(i int) (string, int32, int32) {
	name, p := benchKey(i)
	return name, p, int32(i+i/(benchTopics*benchPartitions)+1) % benchBrokers
}

// BenchmarkSetOwner applies one owner event (ownership moves to another
// broker) to the full table.
func BenchmarkSetOwner(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tb.SetOwner(benchMove(i))
		i++
	}
}

// BenchmarkSetOwnerWithReaders is SetOwner while another goroutine routes
// in a loop (the proxy's situation).
func BenchmarkSetOwnerWithReaders(b *testing.B) {
	tb := benchTable()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name, p := benchKey(i)
			tb.Route(name, p, -1)
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tb.SetOwner(benchMove(i))
		i++
	}
	b.StopTimer()
	close(stop)
	<-done
}

// BenchmarkSetOwnerWithWaiter is SetOwner while someone waits on Changed,
// so each event also allocates and closes a channel.
func BenchmarkSetOwnerWithWaiter(b *testing.B) {
	tb := benchTable()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tb.Changed()
		tb.SetOwner(benchMove(i))
		i++
	}
}

// BenchmarkDeleteSetBroker is a broker leaving and rejoining: the rare
// membership change that rebuilds the broker set (1,000 brokers).
func BenchmarkDeleteSetBroker(b *testing.B) {
	tb := benchTable()
	br, _ := tb.Broker(7)
	b.ReportAllocs()
	for b.Loop() {
		tb.DeleteBroker(7)
		tb.SetBroker(br)
	}
}

// BenchmarkReplace is the full load after a listing or compaction.
func BenchmarkReplace(b *testing.B) {
	tb := NewTable()
	b.ReportAllocs()
	for b.Loop() {
		tb.Replace(benchBuilder())
	}
}

// BenchmarkTableMemory reports the heap the loaded table retains, in the
// bytes/table metric (the builder is garbage by then).
func BenchmarkTableMemory(b *testing.B) {
	var tb *Table
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tb = benchTable()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "bytes/table")
	}
	runtime.KeepAlive(tb)
}
