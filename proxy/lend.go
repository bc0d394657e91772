package proxy

import "sync/atomic"

// lender lends arriving frames buffers of their full size that the pool
// holds free already, so a frame is read in place instead of being copied
// at each doubling of its buffer (readArrived). A lent buffer is memory
// beyond the frame's reservation while the frame arrives, so the lender
// bounds what it has lent at once: memory stays within the request
// budget's (frames at most twice their reservation), plus limit, plus the
// pool's free lists. A client that claims large frames and sends little
// therefore holds at most limit beyond its reservations, and only while
// the pool has buffers to spare; past limit, frames grow as they did
// without lending. The limit is on memory, not on fairness: the budget's
// shares (fair.go) still decide who may hold what.
type lender struct {
	lent  atomic.Int64 // capacity of the buffers lent to frames still arriving
	limit int64
}

// lendLimit is the most the proxy lends at once for a request budget of q
// bytes: a quarter of it, 64 MiB by default.
func lendLimit(q int64) int64 { return q / 4 }

// forFrame returns the spare function for one frame's readArrived and the
// function that gives back what it lent, to call once the frame is read or
// has failed (the buffer itself stays with the frame, under its
// reservation, which by then covers it as it covers any frame's).
func (l *lender) forFrame(bufs bufPool) (spare func(n int) *[]byte, done func()) {
	var took int64
	spare = func(n int) *[]byte {
		c := int64(bufs.Cap(n))
		if l.lent.Add(c) > l.limit {
			l.lent.Add(-c)
			return nil
		}
		b := bufs.Spare(n)
		if b == nil {
			l.lent.Add(-c)
			return nil
		}
		took = c
		return b
	}
	return spare, func() { l.lent.Add(-took) }
}
