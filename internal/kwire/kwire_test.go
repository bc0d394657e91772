package kwire

import (
	"runtime"
	"testing"
)

func TestFlexTable(t *testing.T) {
	ft := NewFlexTable()
	for _, tc := range []struct {
		key, version    int16
		flexible, known bool
	}{
		{0, 8, false, true}, {0, 9, true, true},
		{3, 8, false, true}, {3, 9, true, true},
		{18, 2, false, true}, {18, 3, true, true},
		{18, 99, false, false}, {999, 0, false, false}, {-1, 0, false, false}, {3, -1, false, false},
	} {
		f, k := ft.Lookup(tc.key, tc.version)
		if f != tc.flexible || k != tc.known {
			t.Errorf("Lookup(%d, %d) = %v %v, want %v %v", tc.key, tc.version, f, k, tc.flexible, tc.known)
		}
	}
}

func TestBufPoolSizeClasses(t *testing.T) {
	var p BufPool
	for _, n := range []int{0, 1, 512, 513, 4096, 1 << 20, 1<<20 + 1, 1<<24 + 1} {
		b := p.Get(n)
		if len(*b) != 0 || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		*b = append(*b, 1)
		p.Put(b)
		if again := p.Get(n); len(*again) != 0 {
			t.Fatalf("Get(%d) after Put: len %d, want 0", n, len(*again))
		}
	}
}

// TestBufPoolLargeClassesKeepFramesBounded: frames of a MiB and more come
// back from Get after Put (no garbage collection cycle empties the free
// list), and no more than largeClassBytes of one class are kept.
func TestBufPoolLargeClassesKeepFramesBounded(t *testing.T) {
	var p BufPool
	const size = 16 << 20
	keep := largeClassBytes / size
	put := map[*[]byte]bool{}
	for range keep + 2 {
		b := p.Get(size)
		put[b] = true
	}
	for b := range put {
		p.Put(b)
	}
	runtime.GC()
	runtime.GC() // would empty a sync.Pool
	reused := 0
	for range keep + 2 {
		if put[p.Get(size)] {
			reused++
		}
	}
	if reused != keep {
		t.Fatalf("%d of %d frames reused after Put, want the free list's %d", reused, keep+2, keep)
	}
}
