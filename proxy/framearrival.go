// This file is a connection's frame arrival: for the request frames the
// dispatcher asks for (Produce at validation full), what their bytes gave
// as they arrived (recordcheck.Arrival: the CRC-32C prefix sums of the
// frame and the walks of its records), so that the checks of its record
// batches do not read the batches again.

package proxy

import (
	"encoding/binary"
	"sync"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// frameArrival is a kwire.Observer for one connection's frames, one frame
// at a time: start before each frame, bind after it is read, release once
// the frame's call has begun. Only a frame whose api key (its first two
// bytes) want accepts pays for the arrival; it comes from pool, and goes
// back to it on release.
type frameArrival struct {
	want func(key int16) bool // nil: no frame
	pool *sync.Pool           // of *recordcheck.Arrival, shared by the connections

	state uint8                // arrivalUndecided, arrivalOn or arrivalOff
	a     *recordcheck.Arrival // while on
}

const (
	arrivalUndecided = iota // the api key has not arrived yet
	arrivalOn
	arrivalOff
)

// start begins a new frame.
func (f *frameArrival) start() {
	f.release()
	f.state = arrivalUndecided
	if f.want == nil {
		f.state = arrivalOff
	}
}

// Observe is kwire.Observer.
func (f *frameArrival) Observe(read []byte, k int) {
	switch f.state {
	case arrivalOn:
		f.a.Observe(read, k)
		return
	case arrivalOff:
		return
	}
	if len(read) < 2 {
		return
	}
	if !f.want(int16(binary.BigEndian.Uint16(read))) {
		f.state = arrivalOff
		return
	}
	f.state = arrivalOn
	f.a, _ = f.pool.Get().(*recordcheck.Arrival)
	if f.a == nil {
		f.a = new(recordcheck.Arrival)
	}
	f.a.Reset()
	f.a.Observe(read, len(read)) // all of it is new to the arrival
}

// bind is the arrival of frame, read whole, or nil if it has none.
func (f *frameArrival) bind(frame []byte) *recordcheck.Arrival {
	if f.state != arrivalOn || !f.a.Bind(frame) {
		return nil
	}
	return f.a
}

// release gives the arrival back; what bind returned must not be used
// after.
func (f *frameArrival) release() {
	if f.a != nil {
		f.a.Reset() // unbound: the pool must not keep the frame alive
		f.pool.Put(f.a)
		f.a = nil
	}
	f.state = arrivalOff
}
