package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Fairness of the shared request budget: a frame that is still arriving
// holds budget nobody else can use, so one connection's unfinished frame,
// and one IP's unfinished frames together, may hold only a share of it, and
// a frame must arrive whole within RequestReadTimeout of its first byte. A
// well-behaved client's request then waits behind others' half-sent frames
// at most that long, however many of them there are, and its own budget is
// there at once as long as the others' share leaves room.

// takeShare moves a frame's reservation from had to total bytes, refusing
// it (closing the connection) if that passes the connection's or the IP's
// share of unfinished frames.
func (g *guard) takeShare(ip string, had, total int64) error {
	if total > g.lim.MaxPartialFrameBytesPerConn {
		return &badFrameError{key: -1, reason: badConnShare,
			err: fmt.Errorf("unfinished frame needs %d bytes of budget, more than max-partial-frame-bytes-per-connection %d",
				total, g.lim.MaxPartialFrameBytesPerConn)}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	held := g.partial[ip]
	if held+total-had > g.lim.MaxPartialFrameBytesPerIP {
		return &badFrameError{key: -1, reason: badIPShare,
			err: fmt.Errorf("unfinished frames of %s would hold %d bytes of budget, more than max-partial-frame-bytes-per-ip %d",
				ip, held+total-had, g.lim.MaxPartialFrameBytesPerIP)}
	}
	g.partial[ip] = held + total - had
	return nil
}

// dropShare gives back k bytes of ip's unfinished frames.
func (g *guard) dropShare(ip string, k int64) {
	if k == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.partial[ip] -= k; g.partial[ip] <= 0 {
		delete(g.partial, ip)
	}
}

// connReader is the connection's socket as its reader sees it. Between
// frames a read may wait at most IdleTimeout, unless requests are
// outstanding (a client waiting for a long poll is not idle); within a
// frame, until the frame's deadline (startFrame).
type connReader struct {
	c        *clientConn
	deadline time.Time // of the frame being read; zero between frames
}

func newConnReader(c *clientConn) *connReader { return &connReader{c: c} }

// startFrame waits for the first byte of the next frame, then gives the
// frame RequestReadTimeout to arrive; endFrame ends that.
func (r *connReader) startFrame(br *bufio.Reader) error {
	if _, err := br.Peek(1); err != nil {
		return err
	}
	if t := r.c.s.g.lim.RequestReadTimeout; t > 0 {
		r.deadline = time.Now().Add(t)
	}
	return nil
}

func (r *connReader) endFrame() { r.deadline = time.Time{} }

func (r *connReader) Read(p []byte) (int, error) {
	c := r.c
	lim := &c.s.g.lim
	for {
		var d time.Time
		if lim.IdleTimeout >= 0 {
			d = time.Now().Add(lim.IdleTimeout)
		}
		if !r.deadline.IsZero() && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
		// drain sets draining, then a deadline of now: checking after
		// setting ours means a drain is never missed.
		_ = c.nc.SetReadDeadline(d)
		if c.draining.Load() {
			return 0, os.ErrDeadlineExceeded
		}
		n, err := c.nc.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || c.draining.Load() {
			return n, err
		}
		if !r.deadline.IsZero() && !time.Now().Before(r.deadline) {
			return 0, &badFrameError{key: -1, reason: badReadTime,
				err: fmt.Errorf("frame not complete within request-read-timeout %v: %w", lim.RequestReadTimeout, err)}
		}
		if !c.seq.busy() {
			c.s.g.refused.WithLabelValues(closedIdle).Inc()
			return 0, fmt.Errorf("idle for %v: %w", lim.IdleTimeout, err)
		}
	}
}

var _ io.Reader = (*connReader)(nil)
