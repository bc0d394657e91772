// Package kwire is the one home of Kafka framing in this repository, for
// the proxy, its upstream pool, the stub broker and tests: reading and
// writing size-prefixed frames, request and response headers, skipping
// tagged fields, which request versions use the flexible (KIP-482) header,
// and a pool of frame buffers. It decodes no message bodies; that is kmsg's
// job.
package kwire

import (
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxKey bounds the table; kmsg's keys are dense and far below it.
const maxKey = 255

// FlexTable answers, without allocating, whether a request version uses the
// flexible header. Build it once with NewFlexTable so that hot paths never
// call kmsg.RequestForKey.
type FlexTable [][]bool

// NewFlexTable builds the table from every request kmsg knows.
func NewFlexTable() FlexTable {
	t := make(FlexTable, maxKey+1)
	for key := range t {
		req := kmsg.RequestForKey(int16(key))
		if req == nil {
			continue
		}
		vs := make([]bool, req.MaxVersion()+1)
		for v := range vs {
			req.SetVersion(int16(v))
			vs[v] = req.IsFlexible()
		}
		t[key] = vs
	}
	return t
}

// Lookup reports whether key/version is flexible and whether kmsg knows it.
func (t FlexTable) Lookup(key, version int16) (flexible, known bool) {
	if key < 0 || int(key) >= len(t) || version < 0 || int(version) >= len(t[key]) {
		return false, false
	}
	return t[key][version], true
}

// BufPool recycles frames by power-of-two size class, so that steady traffic
// allocates no frames. Frames above the largest class are left to the garbage
// collector: they are rare and would pin memory in the pool.
//
// Classes of a MiB and more keep their frames on a bounded free list
// instead of a sync.Pool: the garbage collector empties a sync.Pool within
// two cycles, and every frame of several MiB allocated again grows the heap
// (which brings the next cycle sooner) and is zeroed by the runtime, which
// cost the proxy 15% of its CPU in fetch benchmarks. A free list keeps at
// most largeClassBytes per class, so an idle proxy holds at most 5 x that.
// The zero value is ready.
type BufPool struct {
	classes [numClasses]sync.Pool
	large   [numClasses]chan *[]byte // lazily made, classes >= largeShift only
	once    [numClasses]sync.Once
}

const (
	minClassShift   = 9  // 512 B
	maxClassShift   = 24 // 16 MiB: produce and fetch frames of several MiB are common
	numClasses      = maxClassShift - minClassShift + 1
	largeShift      = 20       // 1 MiB and up: bounded free lists
	largeClassBytes = 64 << 20 // per large class
)

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// Get returns a zero-length slice with capacity at least n.
func (p *BufPool) Get(n int) *[]byte {
	c := classOf(n)
	if c >= numClasses {
		b := make([]byte, 0, n)
		return &b
	}
	if free := p.freeList(c); free != nil {
		select {
		case b := <-free:
			*b = (*b)[:0]
			return b
		default:
		}
	} else if v := p.classes[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, 1<<(c+minClassShift))
	return &b
}

// Put returns a slice obtained from Get.
func (p *BufPool) Put(b *[]byte) {
	c := classOf(cap(*b))
	if c >= numClasses || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	if free := p.freeList(c); free != nil {
		select {
		case free <- b:
		default: // full: the garbage collector takes it
		}
		return
	}
	p.classes[c].Put(b)
}

// freeList is class c's bounded free list, or nil for small classes.
func (p *BufPool) freeList(c int) chan *[]byte {
	shift := c + minClassShift
	if shift < largeShift {
		return nil
	}
	p.once[c].Do(func() { p.large[c] = make(chan *[]byte, largeClassBytes>>shift) })
	return p.large[c]
}
