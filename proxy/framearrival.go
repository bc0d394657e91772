// This file is a connection's frame sums: the CRC-32C prefix sums
// (crc32c.Sums) of the request frames the dispatcher asks for (Produce at
// validation full), taken as each frame's bytes arrive, so that the checks
// of its record batches find their CRCs without reading the batches again.

package proxy

import (
	"encoding/binary"
	"sync"

	"github.com/kproxy/kproxy/internal/crc32c"
)

// frameSums is a kwire.Observer for one connection's frames, one frame at
// a time: start before each frame, bind after it is read, release once the
// frame's call has begun. Only a frame whose api key (its first two bytes)
// want accepts pays for the sums; their table comes from pool, and goes
// back to it on release.
type frameSums struct {
	want func(key int16) bool // nil: no frame
	pool *sync.Pool           // of *crc32c.Sums, shared by the connections

	state uint8 // sumsUndecided, sumsOn or sumsOff
	head  [2]byte
	nhead int
	s     *crc32c.Sums // while on
}

const (
	sumsUndecided = iota // the api key has not arrived yet
	sumsOn
	sumsOff
)

// start begins a new frame.
func (f *frameSums) start() {
	f.release()
	f.state, f.nhead = sumsUndecided, 0
	if f.want == nil {
		f.state = sumsOff
	}
}

// Observe is kwire.Observer.
func (f *frameSums) Observe(chunk []byte) {
	switch f.state {
	case sumsOn:
		f.s.Write(chunk)
		return
	case sumsOff:
		return
	}
	k := copy(f.head[f.nhead:], chunk)
	if f.nhead += k; f.nhead < len(f.head) {
		return
	}
	if !f.want(int16(binary.BigEndian.Uint16(f.head[:]))) {
		f.state = sumsOff
		return
	}
	f.state = sumsOn
	f.s, _ = f.pool.Get().(*crc32c.Sums)
	if f.s == nil {
		f.s = new(crc32c.Sums)
	}
	f.s.Reset()
	f.s.Write(f.head[:])
	f.s.Write(chunk[k:])
}

// bind is the sums of frame, read whole, or nil if it has none.
func (f *frameSums) bind(frame []byte) *crc32c.Sums {
	if f.state != sumsOn || !f.s.Bind(frame) {
		return nil
	}
	return f.s
}

// release gives the table back; what bind returned must not be used after.
func (f *frameSums) release() {
	if f.s != nil {
		f.s.Reset() // unbound: the pool must not keep the frame alive
		f.pool.Put(f.s)
		f.s = nil
	}
	f.state = sumsOff
}
