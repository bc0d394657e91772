package upstream

// The reader side of a broker connection: its goroutine matches each
// response frame to the request with its correlation id, in whatever order
// the broker answers, and tells a broker's hang or close from a protocol
// error.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/kproxy/kproxy/internal/kwire"
)

// readLoop hands each response to the request with its correlation id.
func (c *conn) readLoop(br *bufio.Reader) {
	defer c.bp.p.wg.Done()
	for {
		frame, err := readFrame(br, c.bp.p.bufs)
		if err != nil {
			c.failRead(err)
			return
		}
		buf := *frame
		corr := int32(binary.BigEndian.Uint32(buf))
		c.mu.Lock()
		r := c.inflight[corr]
		if r == nil || r.state == stQueued {
			c.mu.Unlock()
			c.fail(kindProtocol, fmt.Errorf("response for unknown correlation id %d: %w", corr, errProtocol))
			return
		}
		c.confirmLocked(r.wseq) // answering in order, the broker is done with what came before
		c.removeLocked(r)
		c.armReadDeadlineLocked()
		orphan := r.orphan
		c.mu.Unlock()
		if orphan { // its caller gave up: nobody will Release the frame
			c.bp.p.bufs.Put(frame)
			r.complete(nil, errOrphan)
			continue
		}

		off := 4
		if r.flexResp {
			n, err := kwire.SkipTags(buf[off:])
			if err != nil {
				err = fmt.Errorf("response header: %w: %w", err, errProtocol)
				r.complete(nil, fmt.Errorf("broker %d (%s): %w", c.bp.id, c.bp.addr, err))
				c.fail(kindProtocol, err)
				return
			}
			off += n
		}
		r.completeFrame(frame, off)
	}
}

func (c *conn) failRead(err error) {
	c.mu.Lock()
	idle := len(c.inflight) == 0
	c.mu.Unlock()
	kind := ioKind(err, kindRead)
	switch {
	case errors.Is(err, errProtocol):
		kind = kindProtocol
	case idle && kind == kindRead:
		kind = kindClosed // a broker may close idle connections; not an error
	case kind == kindTimeout:
		err = fmt.Errorf("a request got no response within its deadline (ReadTimeout %s plus its own timeout): %w", c.bp.p.cfg.ReadTimeout, err)
	}
	c.fail(kind, fmt.Errorf("read: %w", err))
}

func ioKind(err error, def string) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return kindTimeout
	}
	if errors.Is(err, net.ErrClosed) {
		return kindClosed
	}
	return def
}
