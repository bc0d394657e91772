package proxy

import (
	"math/bits"
	"sync"
)

// bufPool recycles client request frames by power-of-two size class, so that steady
// traffic allocates no frames. Frames above the largest class are left to the
// garbage collector: they are rare and would pin memory in the pool.
type bufPool struct {
	classes [numClasses]sync.Pool
}

const (
	minClassShift = 9  // 512 B
	maxClassShift = 20 // 1 MiB
	numClasses    = maxClassShift - minClassShift + 1
)

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minClassShift
}

// get returns a zero-length slice with capacity at least n.
func (p *bufPool) get(n int) *[]byte {
	c := classOf(n)
	if c >= numClasses {
		b := make([]byte, 0, n)
		return &b
	}
	if v := p.classes[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, 1<<(c+minClassShift))
	return &b
}

// put returns a slice obtained from get.
func (p *bufPool) put(b *[]byte) {
	c := classOf(cap(*b))
	if c >= numClasses || cap(*b) != 1<<(c+minClassShift) {
		return
	}
	p.classes[c].Put(b)
}
