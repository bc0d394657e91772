package adminui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// hub fans event-stream messages out to the connected pages. A page whose
// buffer is full is dropped (its browser reconnects and reloads), so a slow
// reader never blocks the broadcaster and never holds more than its buffer.
type hub struct {
	buf, max int

	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool
	dropped int // pages dropped for falling behind (tests read it)
}

type client struct {
	ch   chan []byte
	gone chan struct{} // closed when the hub drops the client
}

func newHub(buf, max int) *hub {
	return &hub{buf: buf, max: max, clients: map[*client]struct{}{}}
}

// add registers a page; false when the hub is full or closed.
func (h *hub) add() (*client, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.clients) >= h.max {
		return nil, false
	}
	c := &client{ch: make(chan []byte, h.buf), gone: make(chan struct{})}
	h.clients[c] = struct{}{}
	return c, true
}

func (h *hub) remove(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(c)
}

func (h *hub) dropLocked(c *client) {
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.gone)
	}
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// broadcast queues msg for every page without waiting for any.
func (h *hub) broadcast(msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c.ch <- msg:
		default:
			h.dropLocked(c)
			h.dropped++
		}
	}
}

// close ends every stream and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		h.dropLocked(c)
	}
}

// event encodes one server-sent event; JSON has no raw newlines.
func event(name string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", name, err)
	}
	out := make([]byte, 0, len(b)+len(name)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...), nil
}

// writeTimeout bounds one write to a page, so that a stalled browser ends
// its own stream instead of holding a handler forever.
const writeTimeout = 10 * time.Second

// serveEvents streams the hub's messages to one page, first the given ones.
func (h *hub) serveEvents(w http.ResponseWriter, r *http.Request, first ...[]byte) {
	c, ok := h.add()
	if !ok {
		http.Error(w, "too many open pages, or shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.remove(c)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	write := func(msg []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for _, msg := range first {
		if !write(msg) {
			return
		}
	}
	for {
		select {
		case msg := <-c.ch:
			if !write(msg) {
				return
			}
		case <-c.gone:
			return
		case <-r.Context().Done():
			return
		}
	}
}
