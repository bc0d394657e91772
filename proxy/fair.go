package proxy

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Fairness of the shared request budget: a frame that is still arriving
// holds budget nobody else can use, so one connection's unfinished frame,
// one IP's unfinished frames together, and all unfinished frames together
// may hold only a share of it, and a frame must arrive whole within
// RequestReadTimeout of its first byte. When a frame's growth would pass a
// share, the connection holding the largest unfinished frame in that share
// is closed, not the one asking (unless it is the largest): a client that
// claims much and sends little cannot make its neighbours' requests the
// ones refused. Each IP's holders and all holders are kept in max-heaps, so
// finding the largest is O(1) and every update O(log n).

// holder is one connection's unfinished frame as the shares see it: a
// connection reads one frame at a time.
type holder struct {
	ip      string // the connection's RemoteAddr's IP
	held    int64  // budget the unfinished frame holds; 0 between frames
	pos     [2]int // index in its IP's heap and in the global heap; -1 outside
	evicted bool   // closed as the largest holder of a share
	// evictReason and evictedHeld say why and holding what it was closed.
	evictReason string
	evictedHeld int64
	// cut closes the connection for the reason, counted and logged
	// (called without the guard's lock held).
	cut func(reason string, err error)
}

func newHolder(ip string, cut func(reason string, err error)) *holder {
	return &holder{ip: ip, pos: [2]int{-1, -1}, cut: cut}
}

// holderHeap is a max-heap of holders by held; slot says which of a
// holder's positions it keeps up to date.
type holderHeap struct {
	slot int
	h    []*holder
}

func (q *holderHeap) Len() int           { return len(q.h) }
func (q *holderHeap) Less(i, j int) bool { return q.h[i].held > q.h[j].held }
func (q *holderHeap) Swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.h[i].pos[q.slot], q.h[j].pos[q.slot] = i, j
}
func (q *holderHeap) Push(x any) {
	h := x.(*holder)
	h.pos[q.slot] = len(q.h)
	q.h = append(q.h, h)
}
func (q *holderHeap) Pop() any {
	h := q.h[len(q.h)-1]
	q.h[len(q.h)-1] = nil
	q.h = q.h[:len(q.h)-1]
	h.pos[q.slot] = -1
	return h
}

// largestOther is the largest holder of q other than h, or nil: the root,
// or when h is the root, the larger of its children.
func (q *holderHeap) largestOther(h *holder) *holder {
	switch {
	case len(q.h) == 0:
		return nil
	case q.h[0] != h:
		return q.h[0]
	case len(q.h) == 1:
		return nil
	case len(q.h) == 2 || q.h[1].held >= q.h[2].held:
		return q.h[1]
	default:
		return q.h[2]
	}
}

// share is the unfinished frames of one IP, or of everyone.
type share struct {
	held  int64
	heap  holderHeap
	limit int64
	name  string // the reason label of a cut for this share
}

// takeShare moves h's reservation to total bytes. If that passes a share,
// the largest other holder of that share is closed and its bytes leave the
// share at once, until the reservation fits; if h already holds more than
// every other holder, h's connection is refused instead. Held bytes, not
// the asked total, decide: a frame arriving fast grows in steps of a chunk
// and is not refused for where it is going while slower frames hold more.
func (g *guard) takeShare(h *holder, total int64) error {
	if total > g.lim.MaxPartialFrameBytesPerConn {
		return &badFrameError{key: -1, reason: badConnShare,
			err: fmt.Errorf("unfinished frame needs %d bytes of budget, more than max-partial-frame-bytes-per-connection %d",
				total, g.lim.MaxPartialFrameBytesPerConn)}
	}
	var cut []*holder
	defer func() { // outside the lock: closing takes the connection's own locks
		for _, v := range cut {
			v.cut(v.evictReason, fmt.Errorf("closed holding the largest unfinished frame (%d bytes) of a full share", v.evictedHeld))
		}
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	if h.evicted {
		return errEvicted
	}
	ip := g.ipShare(h.ip)
	defer func() { // refused: an IP that holds nothing keeps no entry
		if ip.held == 0 && g.partial[h.ip] == ip {
			delete(g.partial, h.ip)
		}
	}()
	for _, s := range []*share{ip, &g.allShare} {
		for s.held+total-h.held > s.limit {
			v := s.heap.largestOther(h)
			if v == nil || v.held < h.held { // h holds the most already
				return &badFrameError{key: -1, reason: s.name,
					err: fmt.Errorf("unfinished frames of %s would hold %d bytes of budget, more than %d",
						shareWho(s, h), s.held+total-h.held, s.limit)}
			}
			v.evictReason, v.evictedHeld = s.name, v.held
			g.setHeld(v, 0)
			v.evicted = true
			cut = append(cut, v)
		}
	}
	g.setHeld(h, total)
	return nil
}

// tryTakeShare moves h's reservation to total bytes if that passes no
// share; unlike takeShare it never closes another holder or refuses h.
func (g *guard) tryTakeShare(h *holder, total int64) bool {
	if total > g.lim.MaxPartialFrameBytesPerConn {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	ipHeld := int64(0)
	if ip := g.partial[h.ip]; ip != nil {
		ipHeld = ip.held
	}
	if h.evicted || ipHeld+total-h.held > g.lim.MaxPartialFrameBytesPerIP ||
		g.allShare.held+total-h.held > g.allShare.limit {
		return false
	}
	g.setHeld(h, total)
	return true
}

func shareWho(s *share, h *holder) string {
	if s.name == badIPShare {
		return h.ip
	}
	return "all connections"
}

// errEvicted: the connection was closed as the largest holder of a share
// while it read (already counted and logged by whoever closed it).
var errEvicted = errors.New("closed as the largest holder of unfinished frames")

// ipShare is ip's share, created empty. Called with g.mu held.
func (g *guard) ipShare(ip string) *share {
	s := g.partial[ip]
	if s == nil {
		s = &share{heap: holderHeap{slot: 0}, limit: g.lim.MaxPartialFrameBytesPerIP, name: badIPShare}
		g.partial[ip] = s
	}
	return s
}

// setHeld moves h to held bytes in its IP's share and the global share,
// entering or leaving their heaps. Called with g.mu held.
func (g *guard) setHeld(h *holder, held int64) {
	ip := g.ipShare(h.ip)
	d := held - h.held
	ip.held += d
	g.allShare.held += d
	h.held = held
	for _, s := range []*share{ip, &g.allShare} {
		q, i := &s.heap, h.pos[s.heap.slot]
		switch {
		case held == 0 && i >= 0:
			heap.Remove(q, i)
		case held > 0 && i < 0:
			heap.Push(q, h)
		case held > 0:
			heap.Fix(q, i)
		}
	}
	if ip.held == 0 {
		delete(g.partial, h.ip)
	}
}

// dropShare ends h's unfinished frame: finished, failed or evicted.
func (g *guard) dropShare(h *holder) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if h.held > 0 {
		g.setHeld(h, 0)
	}
}

// connReader is the connection's socket as its reader sees it. Between
// frames a read may wait at most IdleTimeout, unless requests are
// outstanding (a client waiting for a long poll is not idle); within a
// frame, until the frame's deadline (startFrame).
type connReader struct {
	c        *clientConn
	deadline time.Time  // of the frame being read; zero between frames
	queued   func() int // the socket's unread bytes (socketQueue); nil: not known
}

func newConnReader(c *clientConn) *connReader {
	return &connReader{c: c, queued: socketQueue(c.nc)}
}

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
