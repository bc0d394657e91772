package upstream

import (
	"context"
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

// request is one forwarded request; it implements apis.Pending. Every field
// but done, body and err is guarded by the owning conn's mutex.
type request struct {
	c        *conn
	corr     int32
	flexResp bool // response header carries tagged fields
	noResp   bool // Produce acks=0: the broker answers nothing
	frame    *[]byte
	state    uint8
	orphan   bool // Wait gave up; the reader discards the response

	// written-order list, for the read deadline of the oldest request
	prev, next *request
	writtenAt  time.Time

	done chan struct{}
	body []byte
	err  error
}

// Wait returns the response body or an error wrapping retry.ErrNotSent when
// the request definitely never reached the broker. If ctx ends first, a
// request still queued is withdrawn (not sent); one already written is left
// for the reader to discard and Wait returns an ambiguous error.
func (r *request) Wait(ctx context.Context) ([]byte, error) {
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
	select {
	case <-r.done: // completed while we withdrew
		return r.body, r.err
	default:
	}
	return nil, fmt.Errorf("broker %d: wait for response: %w", r.c.bp.id, context.Cause(ctx))
}

func (r *request) complete(body []byte, err error) {
	r.body, r.err = body, err
	close(r.done)
}
