// Package faultnet is a TCP relay on 127.0.0.1 that can cut, pause and delay
// the traffic it forwards. Tests put it between two parties (a broker and
// etcd, a client and a broker) to inject network faults; benchmarks use it
// as the "plain TCP relay" baseline, since it decodes nothing.
//
// A Relay serves from NewRelay until Close; there is no Run method. Each
// accepted connection gets its own connection to the target, and bytes flow
// both ways unchanged. While no fault is active the relay copies with
// (*net.TCPConn).ReadFrom, which splices socket to socket on Linux without
// copying through user space. A fault change interrupts every copy with a
// read deadline in the past, so the change applies to open connections too.
//
// Guarantees: bytes are delivered in order or the connection is reset; a
// half-close (EOF) on one side is passed on as a half-close. Bytes a copy had
// already read when Pause or Delay was called may still be delivered without
// the new fault.
//
// With the UserSpaceCopy option the relay reads every byte into its own
// buffer and writes it out instead of splicing: what any intermediary that
// looks at the bytes pays at least (the kernel copies each byte out to it and
// back), so benchmarks can tell that floor from a proxy's own work.
package faultnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// faults is the relay's fault state; the zero value forwards normally.
type faults struct {
	cut    bool
	paused bool
	delay  time.Duration
}

func (f faults) String() string {
	return fmt.Sprintf("cut=%t paused=%t delay=%s", f.cut, f.paused, f.delay)
}

// Relay forwards TCP connections from its listen address to a target.
type Relay struct {
	log    *slog.Logger
	target string
	ln     *net.TCPListener
	done   chan struct{} // closed by Close
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the relay starts
	bufs   sync.Pool      // *[]byte chunks for the delayed path
	// userCopy: copy through a user-space buffer, never splice (UserSpaceCopy).
	userCopy bool

	mu       sync.Mutex
	state    faults
	epoch    uint64        // counts fault changes
	changed  chan struct{} // closed and replaced on every fault change
	links    map[*link]struct{}
	closed   bool
	accepted int64
}

// link is one relayed connection: client side and target side.
type link struct {
	client, server *net.TCPConn
	seen           [2]uint64 // fault epoch each direction last acted on; under Relay.mu
}

// Option changes how a relay forwards.
type Option func(*Relay)

// UserSpaceCopy makes the relay copy every byte through a buffer of its own
// instead of splicing socket to socket (see the package comment).
func UserSpaceCopy() Option { return func(r *Relay) { r.userCopy = true } }

// NewRelay listens on listen (for example "127.0.0.1:0") and starts relaying
// every accepted connection to target. logger may be nil.
func NewRelay(listen, target string, logger *slog.Logger, opts ...Option) (*Relay, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	addr, err := net.ResolveTCPAddr("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("relay listen address %q: %w", listen, err)
	}
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay listen on %s: %w", listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{
		log:     logger.With("relay", ln.Addr().String(), "target", target),
		target:  target,
		ln:      ln,
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		changed: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	r.bufs.New = func() any { b := make([]byte, chunkSize); return &b }
	for _, o := range opts {
		o(r)
	}
	r.wg.Add(1)
	go r.acceptLoop()
	return r, nil
}

// Addr is the address clients connect to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Target is the address the relay forwards to.
func (r *Relay) Target() string { return r.target }

// Cut resets every open connection and resets new ones as soon as they are
// accepted, until Heal.
func (r *Relay) Cut() {
	r.setFaults(func(f *faults) { f.cut = true })
	r.mu.Lock()
	links := r.takeLinks()
	r.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Pause stops forwarding bytes in both directions. Connections stay open and
// new ones are accepted; unread bytes wait in the kernel's socket buffers
// until Heal (senders block once those fill).
func (r *Relay) Pause() { r.setFaults(func(f *faults) { f.paused = true }) }

// Delay holds every forwarded chunk for d before writing it on, in both
// directions; d <= 0 removes the delay. Throughput is not limited by d: it
// is added latency, like a long link.
func (r *Relay) Delay(d time.Duration) {
	r.setFaults(func(f *faults) { f.delay = max(d, 0) })
}

// Heal undoes Cut, Pause and Delay: the relay forwards normally again.
// Connections reset by Cut stay gone; clients reconnect.
func (r *Relay) Heal() { r.setFaults(func(f *faults) { *f = faults{} }) }

// Active is the number of relayed connections currently open.
func (r *Relay) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.links)
}

// Accepted is the number of connections accepted since NewRelay, including
// those reset because of Cut.
func (r *Relay) Accepted() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// Close stops listening, resets every open connection and returns once every
// goroutine of the relay has ended. It is safe to call more than once.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	links := r.takeLinks()
	r.mu.Unlock()
	r.cancel()
	err := r.ln.Close()
	for _, l := range links {
		l.reset()
	}
	r.wg.Wait()
	if err != nil {
		return fmt.Errorf("close relay listener %s: %w", r.Addr(), err)
	}
	return nil
}

// setFaults changes the fault state, wakes every goroutine waiting on the old
// state and interrupts every copy so that it re-reads the state.
func (r *Relay) setFaults(change func(*faults)) {
	r.mu.Lock()
	change(&r.state)
	r.epoch++
	epoch := r.epoch
	close(r.changed)
	r.changed = make(chan struct{})
	state := r.state
	links := make([]*link, 0, len(r.links))
	for l := range r.links {
		links = append(links, l)
	}
	r.mu.Unlock()
	r.log.Debug("faults changed", "faults", state.String())
	now := time.Now()
	for _, l := range links {
		// An error means the connection is closing; its copy ends anyway.
		_ = l.client.SetReadDeadline(now)
		_ = l.server.SetReadDeadline(now)
	}
	r.awaitSeen(links, epoch)
}

// ackWait bounds how long a fault change waits for the copies to act on it.
const ackWait = time.Second

// awaitSeen waits, up to ackWait, until every direction of links has read
// the fault state of epoch (or ended). Without it a copy that had just
// passed its deadline check could still forward bytes written after Pause
// returned; a copy blocked writing to a peer that does not read cannot
// answer, hence the bound.
func (r *Relay) awaitSeen(links []*link, epoch uint64) {
	deadline := time.Now().Add(ackWait)
	for {
		r.mu.Lock()
		pending := false
		for _, l := range links {
			_, open := r.links[l]
			if open && (l.seen[0] < epoch || l.seen[1] < epoch) {
				pending = true
				break
			}
		}
		r.mu.Unlock()
		if !pending || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// faults returns the current fault state and a channel closed when it
// changes, and records that direction dir of l acts on it (l may be nil).
func (r *Relay) faults(l *link, dir int) (faults, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l != nil {
		l.seen[dir] = r.epoch
	}
	return r.state, r.changed
}

// takeLinks empties the link set and returns what it held; r.mu is held.
func (r *Relay) takeLinks() []*link {
	links := make([]*link, 0, len(r.links))
	for l := range r.links {
		links = append(links, l)
		delete(r.links, l)
	}
	return links
}

func (r *Relay) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.AcceptTCP()
		if err != nil {
			if r.isClosed() {
				return
			}
			// Out of descriptors and the like: back off briefly, keep serving.
			r.log.Warn("accept failed", "err", err)
			select {
			case <-r.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		r.mu.Lock()
		r.accepted++
		refuse := r.state.cut || r.closed
		if !refuse {
			r.wg.Add(1) // under r.mu, so that Close's Wait cannot start before it
		}
		r.mu.Unlock()
		if refuse {
			resetConn(c)
			continue
		}
		go r.serve(c)
	}
}

func (r *Relay) isClosed() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// serve dials the target for one accepted connection and relays until both
// directions end, the relay cuts it, or the relay closes.
func (r *Relay) serve(client *net.TCPConn) {
	defer r.wg.Done()
	dialer := net.Dialer{Timeout: 10 * time.Second}
	sc, err := dialer.DialContext(r.ctx, "tcp", r.target)
	if err != nil {
		r.log.Warn("dial target failed; resetting client", "client", client.RemoteAddr().String(), "err", err)
		resetConn(client)
		return
	}
	l := &link{client: client, server: sc.(*net.TCPConn)}
	if !r.register(l) {
		l.reset()
		return
	}
	defer r.unregister(l)
	upDone := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(upDone)
		r.direction(l, 0, l.server, l.client, "client to target")
	}()
	r.direction(l, 1, l.client, l.server, "target to client")
	<-upDone
}

// direction copies one way until EOF or failure. A failure resets the whole
// link so that the other direction ends too.
func (r *Relay) direction(l *link, dir int, dst, src *net.TCPConn, name string) {
	if err := r.pump(l, dir, dst, src); err != nil {
		if !errors.Is(err, errCut) {
			r.log.Debug("relay direction failed; resetting link", "dir", name, "err", err)
		}
		l.reset()
	}
}

// register adds l to the link set unless the relay is cut or closed.
func (r *Relay) register(l *link) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.state.cut {
		return false
	}
	r.links[l] = struct{}{}
	return true
}

// unregister removes l and closes both of its connections.
func (r *Relay) unregister(l *link) {
	r.mu.Lock()
	delete(r.links, l)
	r.mu.Unlock()
	l.client.Close()
	l.server.Close()
}

// reset closes both sides with RST, as a cut link would.
func (l *link) reset() {
	resetConn(l.client)
	resetConn(l.server)
}

// resetConn closes c so that the peer sees a reset rather than an orderly EOF.
func resetConn(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// errCut ends a copy because the relay is cut or closed.
var errCut = errors.New("relay cut or closed")
