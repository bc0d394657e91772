// This file is Arrival: what a Produce frame's bytes gave while they
// arrived, for the checks of its batches once the frame is read.

package recordcheck

import (
	"sort"

	"github.com/kproxy/kproxy/internal/crc32c"
)

// Arrival holds, for one request frame, the CRC-32C prefix sums of all of
// it (crc32c.Sums) and the verdicts of the record walks the frame's scan
// finished (scan.go): Observe each read's bytes in order, Bind the frame
// once it is read whole, then check its batches (CheckSummedBatch). The
// zero value is ready; Reset starts a new frame and keeps the memory. A
// nil *Arrival knows nothing, and every check then reads the bytes again.
type Arrival struct {
	sums crc32c.Sums
	scan scan
	next int // the verdict the next lookup most likely wants
}

// Reset starts a new frame; nothing bound before may be used after.
func (a *Arrival) Reset() {
	a.sums.Reset()
	a.scan.reset()
	a.next = 0
}

// Observe is kwire.Observer: read is the frame's bytes read so far, the
// last k of them new.
func (a *Arrival) Observe(read []byte, k int) {
	a.sums.Write(read[len(read)-k:])
	a.scan.advance(read)
}

// Bind says that frame holds all the bytes observed; it reports false (and
// binds nothing) when its length is not what was observed.
func (a *Arrival) Bind(frame []byte) bool { return a.sums.Bind(frame) }

// Checksum is the CRC-32C of b, a range of the bound frame (crc32c.Sums).
func (a *Arrival) Checksum(b []byte) (uint32, bool) {
	if a == nil {
		return 0, false
	}
	return a.sums.Checksum(b)
}

// Walks is how many batches' records the scan walked as they arrived.
func (a *Arrival) Walks() int { return len(a.scan.walks) }

// walked is walk(data, count)'s verdict if the scan reached it for exactly
// these bytes of the bound frame and this count.
func (a *Arrival) walked(data []byte, count int32) (Reason, bool) {
	if a == nil {
		return None, false
	}
	off, ok := a.sums.Offset(data)
	if !ok {
		return None, false
	}
	ws := a.scan.walks
	i := a.next // partitions are checked in the frame's order
	if i >= len(ws) || ws[i].off != off {
		i = sort.Search(len(ws), func(j int) bool { return ws[j].off >= off })
	}
	if i >= len(ws) || ws[i].off != off || ws[i].n != len(data) || ws[i].count != count {
		return None, false
	}
	a.next = i + 1
	return ws[i].res, true
}
