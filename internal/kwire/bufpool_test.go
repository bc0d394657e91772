package kwire

import (
	"sync"
	"testing"
)

// fill takes n frames of size from p and gives them back, as a burst does.
func fill(p *BufPool, n, size int) {
	bs := make([]*[]byte, n)
	for i := range bs {
		bs[i] = p.Get(size)
	}
	for _, b := range bs {
		p.Put(b)
	}
}

// TestBufPoolTrim: a burst's frames stay on the free lists until a whole
// interval passes without their use, then Trim drops them; frames taken in
// an interval survive its Trim. FreeBytes follows every step.
func TestBufPoolTrim(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		size  int // frame size of the burst
		burst int // frames in the burst
		use   int // frames taken and given back between the trims
		want  []int64
	}{
		// after the burst, after Trim 1, after use, after Trim 2, after Trim 3
		{"idle after a burst", mib, 8, 0, []int64{8 * mib, 8 * mib, 8 * mib, 0, 0}},
		{"steady use keeps what it takes", 2 * mib, 8, 3, []int64{16 * mib, 16 * mib, 16 * mib, 6 * mib, 6 * mib}},
		{"use of all keeps all", 16 * mib, 4, 4, []int64{64 * mib, 64 * mib, 64 * mib, 64 * mib, 64 * mib}},
		{"bounded per class", 4 * mib, 20, 0, []int64{64 * mib, 64 * mib, 64 * mib, 0, 0}},
		{"small classes hold nothing", 4 << 10, 8, 0, []int64{0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p BufPool
			check := func(step int) {
				t.Helper()
				if got := p.FreeBytes(); got != tc.want[step] {
					t.Fatalf("step %d: FreeBytes %d MiB, want %d MiB", step, got/mib, tc.want[step]/mib)
				}
			}
			fill(&p, tc.burst, tc.size)
			check(0)
			p.Trim()
			check(1)
			fill(&p, tc.use, tc.size)
			check(2)
			before := p.FreeBytes()
			if dropped := p.Trim(); dropped != before-tc.want[3] {
				t.Fatalf("Trim 2 says it dropped %d bytes, FreeBytes fell by %d", dropped, before-tc.want[3])
			}
			check(3)
			if tc.use > 0 { // the same use again: what it took stays
				fill(&p, tc.use, tc.size)
			}
			p.Trim()
			check(4)
		})
	}
}

// TestBufPoolTrimKeepsUsedFrames: the frames Trim keeps are the ones steady
// traffic takes again, and taking them from a trimmed pool allocates nothing.
func TestBufPoolTrimKeepsUsedFrames(t *testing.T) {
	var p BufPool
	const size, burst, use = 1 << 20, 16, 2
	fill(&p, burst, size)
	p.Trim()
	fill(&p, use, size)
	p.Trim()
	allocs := testing.AllocsPerRun(100, func() {
		fill2(&p, size)
		p.Trim() // each run takes both frames: the mark stays at 0, nothing is dropped
	})
	if allocs != 0 {
		t.Fatalf("steady use between trims allocates %.1f times per run, want 0", allocs)
	}
	if got := p.FreeBytes(); got != use*size {
		t.Fatalf("FreeBytes %d, want %d: Trim dropped frames steady traffic takes", got, use*size)
	}
}

// fill2 takes two frames and gives them back, without fill's slice.
func fill2(p *BufPool, size int) {
	a, b := p.Get(size), p.Get(size)
	p.Put(a)
	p.Put(b)
}

// TestBufPoolLargeHandOff: a large frame handed back by one goroutine may be
// taken at once by another, which then writes its slice header; Put must
// not read the frame after handing it over (run under -race: it found
// exactly that in Put's byte count).
func TestBufPoolLargeHandOff(t *testing.T) {
	var p BufPool
	const workers, rounds = 4, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				b := p.Get(1 << 20)
				*b = append(*b, 1)
				p.Put(b)
			}
		}()
	}
	wg.Wait()
	if free := p.FreeBytes(); free < 0 || free > workers<<20 {
		t.Fatalf("free lists hold %d bytes after %d workers each put one 1 MiB frame back, want 0..%d", free, workers, workers<<20)
	}
}

// TestBufPoolCap: Cap tells the capacity Get returns, in every class and
// beyond the largest.
func TestBufPoolCap(t *testing.T) {
	var p BufPool
	for _, n := range []int{0, 1, 512, 513, 4 << 10, 64<<10 + 1, 1 << 20, 6<<20 + 7, 16 << 20, 16<<20 + 1} {
		if got, want := p.Cap(n), cap(*p.Get(n)); got != want {
			t.Errorf("Cap(%d) = %d, Get gives %d", n, got, want)
		}
	}
}

// TestBufPoolSpare: Spare hands out only what the free lists hold, never a
// new slice: nil from an empty pool and above the largest class, the
// frame given back (of Get's capacity) when one is free.
func TestBufPoolSpare(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		put      bool // one frame of n's class given back first
		wantNone bool
	}{
		{name: "empty pool, small class", n: 4 << 10, wantNone: true},
		{name: "empty pool, large class", n: 1 << 20, wantNone: true},
		{name: "large class, one free", n: 1<<20 + 1, put: true},
		{name: "above the largest class", n: 16<<20 + 1, put: true, wantNone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p BufPool
			if tc.put {
				b := p.Get(tc.n)
				*b = append(*b, 1)
				p.Put(b)
			}
			free := p.FreeBytes()
			b := p.Spare(tc.n)
			if tc.wantNone {
				if b != nil {
					t.Fatalf("Spare(%d) = a slice of %d bytes, want nil", tc.n, cap(*b))
				}
				return
			}
			if b == nil {
				t.Fatalf("Spare(%d) = nil with a frame free", tc.n)
			}
			if len(*b) != 0 || cap(*b) != p.Cap(tc.n) {
				t.Errorf("Spare(%d): len %d, cap %d; want 0, %d", tc.n, len(*b), cap(*b), p.Cap(tc.n))
			}
			if got := p.FreeBytes(); got != free-int64(cap(*b)) {
				t.Errorf("FreeBytes %d after Spare, want %d", got, free-int64(cap(*b)))
			}
			if again := p.Spare(tc.n); again != nil {
				t.Errorf("second Spare(%d) found another frame in a pool given one", tc.n)
			}
		})
	}
}
