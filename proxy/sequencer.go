package proxy

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/kproxy/kproxy/internal/kwire"
)

// response is one encoded response waiting for its turn on the wire.
type response struct {
	hdr   [kwire.MaxResponseHeader]byte // size, correlation id, and the empty tag section if flexible
	hlen  uint8
	body  []byte
	parts [][]byte // the body in pieces, when body is nil
	skip  bool     // nothing to write: Kafka sends no response (acks=0 produce)
	done  func()   // if set, called once body is written: its memory may be reused
}

// bytes is the response's size on the wire.
func (r *response) bytes() int { return int(r.hlen) + bodyLen(r.body, r.parts) }

func bodyLen(body []byte, parts [][]byte) int {
	n := len(body)
	for _, p := range parts {
		n += len(p)
	}
	return n
}

var errSequencerClosed = errors.New("connection closed")

// sequencer keeps one client connection's responses in request order while
// the requests finish in any order, and bounds how many requests the
// connection has outstanding. The reader reserves a ticket per request (in
// read order, blocking while capacity tickets are outstanding), any goroutine
// completes a ticket, and the single writer takes the completed tickets at
// the head of the line, writes them and then releases them. A ticket counts
// against capacity until its response is written, so a client that does not
// read its responses stops the proxy from reading its requests.
//
// Like a Kafka broker, which mutes a connection while its response waits to
// be sent, the reader also waits while the completed responses not yet
// written add up to more than maxUnsent bytes: a connection that does not
// read holds its unsent answers plus those of the requests already begun,
// never more. One response larger than maxUnsent still goes out whole.
//
// Every response handed in has one owner: the ring until the writer takes
// it, then the writer until its write returns. Whoever drops one (close,
// complete after close) calls its done, so pooled memory goes back.
//
// The writer is a role, held from a take until written: the connection's
// writer goroutine takes it in take, and so does a request's goroutine
// whose complete finds its own response at the head of the line and no
// batch being written. That goroutine then writes what is at the head
// itself, which spares the wake of the writer goroutine (on a busy
// machine, a thread woken on the other core) for a request answered while
// the connection's line is idle, the common case. One writer at a time, so
// the order on the wire stays the order of the tickets.
type sequencer struct {
	mu        sync.Mutex
	ring      []seqSlot
	next      uint64 // next ticket to hand out
	head      uint64 // oldest ticket not yet taken by the writer
	free      uint64 // tickets below free no longer count against capacity
	maxUnsent int    // reserve waits while unsent exceeds it (0: no bound)
	unsent    int    // bytes of completed responses not yet written
	taken     int    // of those, the bytes the last take returned
	onMute    func() // called each time unsent passes maxUnsent
	// mutedWaits counts the times reserve waited for unsent bytes.
	mutedWaits int
	fetchOut   int        // fetch tickets marked and not yet written
	takenFetch int        // of those, the ones the last take returned
	fetchWaits int        // times fetchTurn waited
	noInput    bool       // closeInput: no more reservations; drain, then EOF
	writing    bool       // a writer holds what its take (or complete) returned, until written
	own        []response // the batch complete hands its caller, reused
	closed     bool       // close: stop now
	space      chan struct{}
	ready      chan struct{}
	shutdown   chan struct{} // closed by close
}

type seqSlot struct {
	done  bool
	fetch bool // a Fetch: counts in fetchOut until written
	resp  response
}

func newSequencer(capacity, maxUnsent int, onMute func()) *sequencer {
	if onMute == nil {
		onMute = func() {}
	}
	return &sequencer{
		maxUnsent: maxUnsent,
		onMute:    onMute,
		ring:      make([]seqSlot, capacity),
		space:     make(chan struct{}, 1),
		ready:     make(chan struct{}, 1),
		shutdown:  make(chan struct{}),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// reserve returns the next ticket, waiting while the connection has its full
// capacity outstanding or more than maxUnsent bytes of answers unwritten.
func (s *sequencer) reserve(ctx context.Context) (uint64, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed || s.noInput:
			s.mu.Unlock()
			return 0, errSequencerClosed
		case s.maxUnsent > 0 && s.unsent > s.maxUnsent: // muted
			s.mutedWaits++
		case s.next-s.free < uint64(len(s.ring)):
			t := s.next
			s.next++
			s.mu.Unlock()
			return t, nil
		}
		s.mu.Unlock()
		select {
		case <-s.space:
		case <-s.shutdown:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// complete hands in ticket t's response. If t is the head of the line and
// no writer holds a batch, the caller becomes the writer: complete returns
// the completed responses at the head, which the caller writes, clears and
// follows with written, as after take. Otherwise it returns nil and the
// writer sends the response in its turn. A response handed in after close
// is released at once.
func (s *sequencer) complete(t uint64, r response) []response {
	s.mu.Lock()
	if s.closed || t < s.head || t >= s.next {
		s.mu.Unlock()
		r.release()
		return nil
	}
	sl := &s.ring[t%uint64(len(s.ring))]
	sl.done, sl.resp = true, r
	var muted bool
	if !r.skip {
		was := s.unsent
		s.unsent += r.bytes()
		muted = s.maxUnsent > 0 && was <= s.maxUnsent && s.unsent > s.maxUnsent
	}
	wake := t == s.head && !s.writing
	var batch []response
	if wake && !r.skip {
		batch = s.takeLocked(s.own[:0])
		s.own, s.writing = batch, true
	}
	s.mu.Unlock()
	if muted {
		s.onMute()
	}
	if wake && batch == nil {
		signal(s.ready)
	}
	return batch
}

// take waits until the oldest outstanding ticket is complete and no other
// writer holds a batch, and appends every completed response at the head
// of the line to dst, in order. It returns io.EOF once closeInput was
// called and every ticket was written, and errSequencerClosed after close.
// Call written after writing what it took.
func (s *sequencer) take(ctx context.Context, dst []response) ([]response, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return dst, errSequencerClosed
		}
		if !s.writing {
			dst = s.takeLocked(dst)
			if len(dst) > 0 {
				s.writing = true
				s.mu.Unlock()
				return dst, nil
			}
			if s.noInput && s.head == s.next {
				s.mu.Unlock()
				return dst, io.EOF
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-s.shutdown:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// takeLocked moves the completed responses at the head of the line to dst.
// Tickets that had nothing to write (skipped) are freed at once.
func (s *sequencer) takeLocked(dst []response) []response {
	for s.head < s.next {
		sl := &s.ring[s.head%uint64(len(s.ring))]
		if !sl.done {
			break
		}
		if !sl.resp.skip {
			dst = append(dst, sl.resp)
			s.taken += sl.resp.bytes()
		}
		if sl.fetch {
			s.takenFetch++
		}
		*sl = seqSlot{}
		s.head++
	}
	if len(dst) == 0 && s.free != s.head { // only skipped tickets: nothing to write
		s.free = s.head
		signal(s.space)
	}
	return dst
}

// fetchTurn waits until no Fetch read before ticket t is still unwritten,
// then counts t as one. A fetch answer can be as large as the client asks
// (fetch.max.bytes, 50 MiB by default), so a connection that pipelines
// fetches and does not read would otherwise hold one per ticket before a
// single answer is unsent; consumers send one fetch at a time per broker
// connection anyway (Kafka's own clients, librdkafka, kgo, sarama), so
// they never wait here.
func (s *sequencer) fetchTurn(ctx context.Context, t uint64) error {
	waited := false
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return errSequencerClosed
		case s.fetchOut == 0:
			s.fetchOut++
			s.ring[t%uint64(len(s.ring))].fetch = true
			s.mu.Unlock()
			return nil
		}
		if !waited {
			waited = true
			s.fetchWaits++
		}
		s.mu.Unlock()
		select {
		case <-s.space:
		case <-s.shutdown:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// written releases the tickets the last take (or complete) returned and
// gives up the writer's role; the writer goroutine is woken if what
// completed meanwhile, or the end of input, is now its to handle.
func (s *sequencer) written() {
	s.mu.Lock()
	s.free = s.head
	s.unsent -= s.taken
	s.taken = 0
	s.fetchOut -= s.takenFetch
	s.takenFetch = 0
	s.writing = false
	more := s.noInput && s.head == s.next
	if s.head < s.next {
		more = s.ring[s.head%uint64(len(s.ring))].done
	}
	s.mu.Unlock()
	signal(s.space)
	if more {
		signal(s.ready)
	}
}

// closeInput refuses further reservations; take drains what is outstanding
// and then returns io.EOF. It also gives back an unused reserved ticket when
// called with it (the reader reserves before it knows whether a request
// follows).
func (s *sequencer) closeInput(unused uint64, hasUnused bool) {
	s.mu.Lock()
	if hasUnused && unused == s.next-1 {
		s.next--
	}
	s.noInput = true
	s.mu.Unlock()
	signal(s.ready)
}

// close stops the sequencer at once: pending responses are dropped and
// released (the writer releases the ones it took).
func (s *sequencer) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.shutdown)
	var drop []response
	for t := s.head; t < s.next; t++ {
		sl := &s.ring[t%uint64(len(s.ring))]
		if sl.done {
			drop = append(drop, sl.resp)
		}
		*sl = seqSlot{}
	}
	s.unsent = 0
	s.mu.Unlock()
	for i := range drop { // outside the lock: done may take the pool's
		drop[i].release()
	}
}

// release hands back the memory of a response that will not be written.
func (r *response) release() {
	if r.done != nil {
		r.done()
		r.done = nil
	}
}
