package lease_test

import (
	"net"
	"sync"
	"testing"
)

// relay is a TCP relay between an etcd client and the server that a test can
// pause (bytes stop flowing, connections stay open: a stalled network or a
// paused process) or cut (every connection closed, new ones refused).
type relay struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("relay listen: %v", err)
	}
	r := &relay{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// Endpoint is the URL clients dial.
func (r *relay) Endpoint() string { return "http://" + r.ln.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		refuse := r.cut || r.closed
		r.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns[c], r.conns[up] = struct{}{}, struct{}{}
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pipe(up, c)
		go r.pipe(c, up)
	}
}

func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate blocks while paused; false means the relay is cut or closed.
func (r *relay) gate() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.paused && !r.cut && !r.closed {
		r.cond.Wait()
	}
	return !r.cut && !r.closed
}

func (r *relay) Pause() { r.set(func() { r.paused = true }) }

func (r *relay) Resume() { r.set(func() { r.paused, r.cut = false, false }) }

// Cut closes every connection and refuses new ones until Resume.
func (r *relay) Cut() {
	r.set(func() { r.cut = true })
	r.dropConns()
}

func (r *relay) set(f func()) {
	r.mu.Lock()
	f()
	r.cond.Broadcast()
	r.mu.Unlock()
}

func (r *relay) dropConns() {
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
	r.mu.Unlock()
}

func (r *relay) close() {
	r.set(func() { r.closed = true })
	r.ln.Close()
	r.dropConns()
	r.wg.Wait()
}
