package kwire

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// BufPool recycles frames by power-of-two size class, so that steady traffic
// allocates no frames. Frames above the largest class are left to the garbage
// collector: they are rare and would pin memory in the pool. One pool serves
// a whole proxy (client frames, upstream frames, merged answers), so that
// what one layer gives back the next can take.
//
// Classes of a MiB and more keep their frames on a bounded free list
// instead of a sync.Pool: the garbage collector empties a sync.Pool within
// two cycles, and every frame of several MiB allocated again grows the heap
// (which brings the next cycle sooner) and is zeroed by the runtime, which
// cost the proxy 15% of its CPU in fetch benchmarks. A free list keeps at
// most largeClassBytes per class (5 x that in all).
//
// Trim gives back what the free lists did not need: each list remembers the
// fewest frames it held since the previous Trim, and Trim drops that many,
// since no Get took them in the meantime. Called every interval, it keeps
// the frames steady traffic cycles through and lets go of a burst's
// leftovers: a frame nobody took for a whole interval is dropped at the
// next Trim, so an idle pool is empty after two. Dropped frames go to the
// garbage collector; the Go runtime returns their pages to the operating
// system in the background, so RSS falls some minutes later, not at once.
// The zero value is ready.
type BufPool struct {
	classes [numClasses]sync.Pool // classes below largeShift
	large   [numLarge]freeList
	free    atomic.Int64 // bytes on the large free lists
}

const (
	minClassShift   = 9  // 512 B
	maxClassShift   = 24 // 16 MiB: produce and fetch frames of several MiB are common
	numClasses      = maxClassShift - minClassShift + 1
	largeShift      = 20 // 1 MiB and up: bounded free lists
	numLarge        = maxClassShift - largeShift + 1
	largeClassBytes = 64 << 20 // per large class
)

// freeList is a stack of frames of one large class. The bottom frames are
// the ones unused longest, so Trim drops those.
type freeList struct {
	mu   sync.Mutex
	bufs []*[]byte
	low  int // fewest frames held since the last Trim
}

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// largeIndex is class c's index in BufPool.large, or -1 for a small class.
func largeIndex(c int) int { return c + minClassShift - largeShift }

// Get returns a zero-length slice with capacity at least n.
func (p *BufPool) Get(n int) *[]byte {
	if b := p.Spare(n); b != nil {
		return b
	}
	b := make([]byte, 0, p.Cap(n))
	return &b
}

// Spare is Get when the pool holds a free slice for n, and nil otherwise:
// it never allocates, so a caller may take a whole frame's buffer early,
// while frames are recycled, without making the heap grow for it.
func (p *BufPool) Spare(n int) *[]byte {
	c := classOf(n)
	if c >= numClasses {
		return nil
	}
	var b *[]byte
	if l := largeIndex(c); l >= 0 {
		if b = p.large[l].pop(); b != nil {
			p.free.Add(-int64(cap(*b)))
		}
	} else if v := p.classes[c].Get(); v != nil {
		b = v.(*[]byte)
	}
	if b != nil {
		*b = (*b)[:0]
	}
	return b
}

// Cap is the capacity of the slice Get(n) returns when it makes one: a
// caller that bounds the memory it holds sizes by it, not by n.
func (p *BufPool) Cap(n int) int {
	c := classOf(n)
	if c >= numClasses {
		return n
	}
	return 1 << (c + minClassShift)
}

// Put returns a slice obtained from Get.
func (p *BufPool) Put(b *[]byte) {
	c := classOf(cap(*b))
	if c >= numClasses || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	if l := largeIndex(c); l >= 0 {
		// Counted before the push: once pushed, another goroutine may take
		// b and write its header.
		size := int64(cap(*b))
		if p.large[l].push(b, largeClassBytes>>(c+minClassShift)) {
			p.free.Add(size)
		} // else full: the garbage collector takes it
		return
	}
	p.classes[c].Put(b)
}

// Trim drops from each free list the frames it held throughout the time
// since the previous Trim, and returns how many bytes it dropped.
func (p *BufPool) Trim() int64 {
	var dropped int64
	for l := range p.large {
		dropped += int64(p.large[l].trim()) << (l + largeShift)
	}
	p.free.Add(-dropped)
	return dropped
}

// FreeBytes is how many bytes the free lists hold: memory the pool keeps
// for later frames, none of it in use.
func (p *BufPool) FreeBytes() int64 { return p.free.Load() }

func (f *freeList) pop() *[]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.bufs)
	if n == 0 {
		return nil
	}
	b := f.bufs[n-1]
	f.bufs[n-1] = nil
	f.bufs = f.bufs[:n-1]
	f.low = min(f.low, n-1)
	return b
}

// push keeps b unless the list holds limit frames already.
func (f *freeList) push(b *[]byte, limit int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bufs) >= limit {
		return false
	}
	if f.bufs == nil {
		f.bufs = make([]*[]byte, 0, limit) // once: push never allocates again
	}
	f.bufs = append(f.bufs, b)
	return true
}

// trim drops the low-water mark's frames from the bottom and starts a new
// interval; it returns how many it dropped.
func (f *freeList) trim() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	drop := f.low
	n := copy(f.bufs, f.bufs[drop:])
	clear(f.bufs[n:])
	f.bufs = f.bufs[:n]
	f.low = n
	return drop
}
