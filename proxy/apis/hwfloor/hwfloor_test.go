package hwfloor

import (
	"sync"
	"testing"
)

func id(b byte) (v [16]byte) { v[0] = b; return v }

// TestRaise: an answer is raised to the highest watermark reported before it
// for the same partition of the same topic id, never beyond, and never for
// another partition, another topic id, an error or a topic without an id.
func TestRaise(t *testing.T) {
	f := New(nil)
	steps := []struct {
		name string
		id   [16]byte
		part int32
		hwm  int64
		want int64
	}{
		{"first answer passes", id(1), 0, 10, 10},
		{"lower answer is raised", id(1), 0, 7, 10},
		{"higher answer passes and raises the floor", id(1), 0, 12, 12},
		{"the new floor holds", id(1), 0, 11, 12},
		{"another partition has its own floor", id(1), 1, 3, 3},
		{"a partition in a later chunk", id(1), 200, 5, 5},
		{"the first chunk survived the growth", id(1), 0, 1, 12},
		{"another topic id (recreated topic) starts afresh", id(2), 0, 1, 1},
		{"an error (no watermark) is left alone", id(1), 0, -1, -1},
		{"the zero id gets no floor", [16]byte{}, 0, 2, 2},
		{"the zero id records nothing", [16]byte{}, 0, 1, 1},
		{"a negative partition is left alone", id(1), -1, 4, 4},
		{"a partition past the bound is left alone", id(1), maxPartition, 4, 4},
	}
	for _, s := range steps {
		if got := f.Raise(s.id, s.part, s.hwm); got != s.want {
			t.Errorf("%s: Raise(%v, %d, %d) = %d, want %d", s.name, s.id[0], s.part, s.hwm, got, s.want)
		}
	}
}

// TestGoneTopicsDropped: adding a topic drops the floors of topics that no
// longer exist.
func TestGoneTopicsDropped(t *testing.T) {
	alive := map[[16]byte]bool{id(1): true, id(2): true}
	f := New(func(v [16]byte) bool { return alive[v] })
	f.Raise(id(1), 0, 5)
	f.Raise(id(2), 0, 5)
	if f.Len() != 2 {
		t.Fatalf("%d topics with floors, want 2", f.Len())
	}
	delete(alive, id(1))
	alive[id(3)] = true
	f.Raise(id(3), 0, 1)
	if f.Len() != 2 {
		t.Fatalf("%d topics with floors after topic 1 went, want 2 (topics 2 and 3)", f.Len())
	}
	if got := f.Raise(id(1), 0, 1); got != 1 {
		t.Errorf("topic 1 came back with floor %d, want none (1)", got)
	}
}

// TestConcurrentRaises: raises from many goroutines, while partitions are
// added, leave every floor at the highest value raised (run with -race).
func TestConcurrentRaises(t *testing.T) {
	f := New(nil)
	const workers, parts, top = 8, 300, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range int64(top) {
				for p := range int32(parts) {
					f.Raise(id(1), (p+int32(w)*37)%parts, v)
				}
			}
		}()
	}
	wg.Wait()
	for p := range int32(parts) {
		if got := f.Raise(id(1), p, 0); got != top-1 {
			t.Errorf("partition %d floor %d, want %d", p, got, top-1)
		}
	}
}

func BenchmarkRaise(b *testing.B) {
	f := New(nil)
	f.Raise(id(1), 7, 1)
	b.ReportAllocs()
	for i := range b.N {
		f.Raise(id(1), 7, int64(i))
	}
}
