package kwire

import "testing"

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
