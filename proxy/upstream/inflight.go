package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/retry"
)

// request states; a request moves forward only.
const (
	stQueued  uint8 = iota // in the conn's queue; the queue owns the frame
	stWriting              // handed to the writer; the writer owns the frame
	stWritten              // fully written; awaiting its response
	stDone                 // completed
)

// wireReq is one forwarded request on a connection; it implements Pending. Every field
// but done, body and err is guarded by the owning conn's mutex.
type wireReq struct {
	c        *conn
	corr     int32
	flexResp bool   // response header carries tagged fields
	noResp   bool   // Produce acks=0: the broker answers nothing
	barrier  bool   // the connection's own, confirming acks=0 requests (confirm.go)
	wseq     uint64 // position in the wire order, once fully written
	frame    *[]byte
	size     int           // of the frame on the wire: frame alone, or frame's header and parts
	parts    [][]byte      // a VecBody's pieces after the header in frame; nil once given back
	lent     chan struct{} // closed when parts are given back; nil if none were lent
	state    uint8
	orphan   bool // Wait gave up: the reader hands the answer straight back to the pool

	// patience is how long after its write the response may take: the
	// pool's ReadTimeout plus the request's own timeout (a produce's
	// timeout, a fetch's max wait, the caller's deadline).
	patience time.Duration
	deadline time.Time // once written
	hidx     int       // index in the conn's deadline heap

	done chan struct{}
	body []byte
	resp *[]byte // pooled frame body aliases; Release hands it back
	err  error
}

// Wait returns the response body or an error wrapping retry.ErrNotSent when
// the request definitely never reached the broker. If ctx ends first, a
// request still queued is withdrawn (not sent); one already written is left
// for the reader to discard and Wait returns an ambiguous error.
func (r *wireReq) Wait(ctx context.Context) ([]byte, error) {
	select {
	case <-r.done:
		return r.body, r.err
	default:
	}
	select {
	case <-r.done:
		return r.body, r.err
	case <-ctx.Done():
	}
	if r.c.withdraw(r) {
		return nil, fmt.Errorf("broker %d: wait: %w: %w", r.c.bp.id, retry.ErrNotSent, context.Cause(ctx))
	}
	if r.c.dying.Load() {
		// The failing connection completes r at once, and knows better
		// whether it was sent.
		<-r.done
		return r.body, r.err
	}
	if r.c.orphan(r) {
		return nil, fmt.Errorf("broker %d: wait for response: %w", r.c.bp.id, context.Cause(ctx))
	}
	<-r.done // completed while we withdrew
	return r.body, r.err
}

// errOrphan completes a request whose caller stopped waiting.
var errOrphan = errors.New("response discarded: its caller stopped waiting")

// orphan marks r, written and not answered, as one whose caller stopped
// waiting, so that the reader hands its response frame straight back to
// the pool. It reports false if r was answered already (the caller then
// owns the response and releases it).
func (c *conn) orphan(r *wireReq) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-r.done:
		return false
	default:
	}
	if r.state == stDone { // removed by the reader, completing right now
		return false
	}
	r.orphan = true
	return true
}

// lend makes pieces, the body of a VecBody after frame's header of hdr
// bytes, what is written, and sizes the frame for them.
func (r *wireReq) lend(hdr int, pieces [][]byte) {
	r.size = len(*r.frame)
	if pieces == nil {
		return
	}
	r.parts = make([][]byte, 0, len(pieces)+1)
	r.parts = append(r.parts, (*r.frame)[:hdr])
	r.size = hdr
	for _, p := range pieces {
		if len(p) > 0 {
			r.parts = append(r.parts, p)
			r.size += len(p)
		}
	}
	r.lent = make(chan struct{})
}

// giveBack ends the loan of r's parts: no write reads them any more. Called
// with the conn's mutex held, by whoever last owned the frame: the writer
// once its write returned, or withdraw and fail for a request still queued.
func (r *wireReq) giveBack() {
	if r.parts != nil {
		r.parts = nil
		close(r.lent)
	}
}

// Reclaim implements Lender.
func (r *wireReq) Reclaim() {
	if r.lent == nil {
		return
	}
	r.c.withdraw(r)
	<-r.lent
}

func (r *wireReq) complete(body []byte, err error) {
	r.body, r.err = body, err
	close(r.done)
}

// completeFrame completes r with the pooled response frame resp, whose body
// starts at off.
func (r *wireReq) completeFrame(resp *[]byte, off int) {
	r.resp = resp
	r.complete((*resp)[off:], nil)
}

// Release hands the response frame back to the pool. The caller of Wait
// calls it once nothing references the body any more; a request whose
// caller never does leaves its frame to the garbage collector.
func (r *wireReq) Release() {
	select {
	case <-r.done:
	default:
		return // not complete: the reader may still fill it
	}
	if b := r.resp; b != nil {
		r.resp, r.body = nil, nil
		r.c.bp.p.bufs.Put(b)
	}
}

// deadlineHeap orders written requests by deadline, so that the connection's
// read deadline is the earliest one.
type deadlineHeap []*wireReq

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *deadlineHeap) Push(x any) {
	r := x.(*wireReq)
	r.hidx = len(*h)
	*h = append(*h, r)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.hidx = -1
	return r
}
