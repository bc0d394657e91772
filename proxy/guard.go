package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/internal/ratelog"
)

// Limits protect the proxy from large or hostile clients, as Kafka's own
// settings of the same names do. Zero values take the defaults in brackets.
type Limits struct {
	// QueuedMaxRequestBytes bounds the request bytes buffered across all
	// connections (Kafka's queued.max.request.bytes) [256 MiB]. A
	// connection's frame is reserved as its bytes arrive (what arrived
	// plus one read chunk, kwire.ReadChunkBytes); one that finds the
	// budget spent waits, reading nothing, until earlier requests finish.
	// SmallFrameReserve of it only frames of at most SmallFrameBytes may
	// take, so that ApiVersions and Metadata are answered while large
	// frames hold the rest; a frame larger than what it may take closes
	// its connection. Unfinished frames together may hold the part
	// outside the reserve; passing that closes the largest holder.
	QueuedMaxRequestBytes int64
	// GrowWait bounds how long a connection holding part of a frame waits
	// for budget for the rest before it is closed [30s].
	GrowWait            time.Duration
	MaxConnections      int // open client connections [no limit]
	MaxConnectionsPerIP int // open client connections from one IP [no limit]
	// IdleTimeout closes a connection that sent nothing for this long
	// while no request of it was outstanding (Kafka's
	// connections.max.idle.ms) [10m]; negative: never.
	IdleTimeout time.Duration
	// BadInputLogInterval: bad input is logged at most once per reason per
	// interval, with the count of lines left out [10s].
	BadInputLogInterval time.Duration

	// MaxUnsentBytesPerConn mutes a connection (no more of its requests
	// are read) while its answers waiting to be written exceed it, as a
	// Kafka broker mutes a connection while its response waits [1 MiB];
	// negative: no bound. One larger answer still goes out whole.
	MaxUnsentBytesPerConn int
	// MaxPartialFrameBytesPerConn is the most of the shared budget one
	// connection's unfinished frame may hold; a frame that needs more
	// closes its connection [half of QueuedMaxRequestBytes].
	MaxPartialFrameBytesPerConn int64
	// MaxPartialFrameBytesPerIP is the most of the shared budget the
	// unfinished frames of one IP's connections may hold together; a
	// frame that would pass it closes the connection of that IP holding
	// the largest unfinished frame (the asker only if it is the largest)
	// [half of QueuedMaxRequestBytes].
	MaxPartialFrameBytesPerIP int64
	// RequestReadTimeout: a frame must arrive whole within this time of
	// its first byte, or its connection is closed [30s: Kafka's Java
	// clients give up on a request after 30s, librdkafka after 60s];
	// negative: no limit.
	RequestReadTimeout time.Duration
}

func (l *Limits) setDefaults() {
	if l.QueuedMaxRequestBytes <= 0 {
		l.QueuedMaxRequestBytes = 256 << 20
	}
	if l.GrowWait <= 0 {
		l.GrowWait = 30 * time.Second
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = 10 * time.Minute
	}
	if l.BadInputLogInterval <= 0 {
		l.BadInputLogInterval = 10 * time.Second
	}
	if l.MaxUnsentBytesPerConn == 0 {
		l.MaxUnsentBytesPerConn = 1 << 20
	}
	if l.MaxPartialFrameBytesPerConn <= 0 {
		l.MaxPartialFrameBytesPerConn = l.QueuedMaxRequestBytes / 2
	}
	if l.MaxPartialFrameBytesPerIP <= 0 {
		l.MaxPartialFrameBytesPerIP = l.QueuedMaxRequestBytes / 2
	}
	if l.RequestReadTimeout == 0 {
		l.RequestReadTimeout = 30 * time.Second
	}
}

// Values of the reason label of kproxy_bad_input_total.
const (
	badFrameSize  = "frame_size" // negative or above max-frame-bytes
	badOverBudget = "frame_over_budget"
	badBudgetWait = "budget_wait"         // a half-read frame found no budget in GrowWait
	badHeader     = "header"              // truncated header, client id or tags
	badUnknownAPI = "unknown_api"         // api key or version kmsg does not know
	badRequest    = "request"             // the dispatcher could not serve the body
	badConnShare  = "partial_conn_share"  // an unfinished frame above MaxPartialFrameBytesPerConn
	badIPShare    = "partial_ip_share"    // one IP's unfinished frames above MaxPartialFrameBytesPerIP
	badAllShare   = "partial_total_share" // all unfinished frames above the budget outside the small-frame reserve
	badReadTime   = "request_read_timeout"
)

// Values of the reason label of kproxy_connections_refused_total.
const (
	refusedMax   = "max_connections"
	refusedPerIP = "max_connections_per_ip"
	closedIdle   = "idle_timeout"
)

// guard enforces Limits: the shared buffer budget, the connection counts and
// the rate-limited reporting of bad input.
type guard struct {
	lim     Limits
	budget  *semaphore.Weighted // the budget outside the small-frame reserve
	reserve int64               // SmallFrameReserve: only small frames take it
	inRes   atomic.Int64        // bytes of the reserve taken
	growing chan struct{}       // one token: the one half-read frame waiting for budget
	lend    lender              // full-size buffers for arriving frames (lend.go)
	log     *ratelog.Logger

	badInput *prometheus.CounterVec
	refused  *prometheus.CounterVec
	queued   prometheus.Gauge

	mu       sync.Mutex
	open     int
	perIP    map[string]int
	partial  map[string]*share // unfinished frames, by client IP (fair.go)
	allShare share             // every unfinished frame (fair.go)
}

// SmallFrameBytes is the largest frame that may take the small-frame
// reserve: ApiVersions, Metadata, Heartbeat and the like, far below it.
// Equal to the read chunk, so a small frame reserves all of itself at once.
const SmallFrameBytes = kwire.ReadChunkBytes

// SmallFrameReserve is the part of a budget of q bytes that only frames of
// at most SmallFrameBytes may take: an eighth, at most 8 MiB; none in a
// budget below two small frames, where a small frame could otherwise be
// larger than the part outside the reserve and wait for it for ever.
func SmallFrameReserve(q int64) int64 {
	if q < 2*SmallFrameBytes {
		return 0
	}
	return min(q/8, 8<<20)
}

func newGuard(lim Limits, log *slog.Logger, reg prometheus.Registerer) *guard {
	lim.setDefaults()
	reserve := SmallFrameReserve(lim.QueuedMaxRequestBytes)
	g := &guard{
		lim:      lim,
		budget:   semaphore.NewWeighted(lim.QueuedMaxRequestBytes - reserve),
		reserve:  reserve,
		growing:  make(chan struct{}, 1),
		lend:     lender{limit: lendLimit(lim.QueuedMaxRequestBytes)},
		log:      ratelog.New(log, slog.LevelWarn, lim.BadInputLogInterval, nil),
		perIP:    make(map[string]int),
		partial:  make(map[string]*share),
		allShare: share{heap: holderHeap{slot: 1}, limit: lim.QueuedMaxRequestBytes - reserve, name: badAllShare},
		badInput: NewBadInput(reg),
		refused: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_connections_refused_total",
			Help: "Client connections refused at accept or closed for the proxy's limits, by reason.",
		}, []string{"reason"}),
		queued: promreg.Gauge(reg, prometheus.GaugeOpts{
			Name: "kproxy_queued_request_bytes",
			Help: "Request bytes buffered across client connections (bounded by queued-max-request-bytes).",
		}),
	}
	for _, r := range []string{badFrameSize, badOverBudget, badBudgetWait, badHeader, badUnknownAPI, badRequest,
		badConnShare, badIPShare, badAllShare, badReadTime} {
		g.badInput.WithLabelValues(r)
	}
	for _, r := range []string{refusedMax, refusedPerIP, closedIdle} {
		g.refused.WithLabelValues(r)
	}
	return g
}

// NewBadInput is kproxy_bad_input_total, registered on reg (nil: not
// exported). The guard counts bad frames in it and the dispatcher refused
// produce partitions (reasons produce_*); on one registry both get the one
// collector.
func NewBadInput(reg prometheus.Registerer) *prometheus.CounterVec {
	return promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_bad_input_total",
		Help: "Client input the proxy refused, by reason: frames (their connection closed) and, reasons produce_*, Produce partitions whose record data failed validation (answered with Kafka's error code).",
	}, []string{"reason"})
}

// admit counts a new connection against the limits. It returns the
// function that uncounts it, or the reason it is refused.
func (g *guard) admit(nc net.Conn) (release func(), reason string) {
	return g.admitIP(remoteIP(nc))
}

// admitIP is admit for a connection from ip; ip "" (a connection whose
// client is not known yet: its PROXY header is still arriving) counts
// against MaxConnections only.
func (g *guard) admitIP(ip string) (release func(), reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.lim.MaxConnections > 0 && g.open >= g.lim.MaxConnections:
		return nil, refusedMax
	case ip != "" && g.lim.MaxConnectionsPerIP > 0 && g.perIP[ip] >= g.lim.MaxConnectionsPerIP:
		return nil, refusedPerIP
	}
	g.open++
	if ip != "" {
		g.perIP[ip]++
	}
	return sync.OnceFunc(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.open--
		if ip == "" {
			return
		}
		if g.perIP[ip]--; g.perIP[ip] <= 0 {
			delete(g.perIP, ip)
		}
	}), ""
}

func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// refuse closes a connection refused at accept.
func (g *guard) refuse(nc net.Conn, reason string) {
	g.refused.WithLabelValues(reason).Inc()
	g.log.Log(reason, "client connection refused", "remote", nc.RemoteAddr().String())
	nc.Close()
}

// report counts and logs (rate-limited) bad input from connection c.
func (g *guard) report(c *clientConn, reason, msg string, args ...any) {
	g.badInput.WithLabelValues(reason).Inc()
	g.log.Log(reason, msg, append([]any{"conn", c.id, "remote", c.nc.RemoteAddr().String()}, args...)...)
}

// readFrame reads an n-byte frame, reserving the shared budget for its
// bytes as they arrive rather than as claimed (what arrived plus one read
// chunk; nothing for a bare size claim), so a client that claims a large
// frame and sends little holds little of it. A frame whose bytes have all
// arrived (in br's buffer) is reserved whole and is never unfinished. A
// connection that holds no reservation waits for its first chunk with its
// reads paused, however long; one that holds part of a frame waits at most
// GrowWait for more and is then closed (budget_wait). While unfinished, the
// frame's reservation also counts against its connection's, its IP's and
// everyone's share (fair.go). The frame's length is its reservation: hand
// it back with put. queued, if not nil, is how many bytes the kernel holds
// unread for the socket: those count as arrived too (readArrived). obs, if
// not nil, sees the frame's bytes as they are read (kwire.Observer).
func (g *guard) readFrame(ctx context.Context, h *holder, br *bufio.Reader, bufs bufPool, n int, queued func() int, obs kwire.Observer) (*[]byte, error) {
	small := n <= SmallFrameBytes
	if limit := g.frameLimit(small); int64(n) > limit {
		return nil, &badFrameError{key: -1, reason: badOverBudget,
			err: fmt.Errorf("frame of %d bytes exceeds the %d bytes of queued-max-request-bytes it may take", n, limit)}
	}
	if n > 0 {
		if _, err := br.Peek(1); err != nil { // a bare size claim reserves nothing
			return nil, err
		}
	}
	if br.Buffered() >= n { // arrived whole: nothing unfinished to share
		if err := g.acquire(ctx, int64(n), small, false); err != nil {
			return nil, err
		}
		g.queued.Add(float64(n))
		return bufs.ReadGrowingObserved(br, n, nil, obs) // from br's buffer: cannot fail
	}
	r := &growth{g: g, h: h, small: small}
	spare, lent := g.lend.forFrame(bufs)
	buf, err := readArrived(br, queued, obs, bufs, spare, n, func(total, least int) (int, error) { return r.growUpTo(ctx, total, least) })
	lent()
	g.dropShare(h) // finished or failed: no longer partial
	if err != nil {
		g.release(r.reserved, small)
		return nil, err
	}
	return buf, nil
}

// growth is the reservation of something still arriving: an unfinished
// frame, or a PROXY header (proxied.go).
type growth struct {
	g        *guard
	h        *holder
	small    bool
	reserved int
}

// grow moves the reservation to total bytes: h's shares first (which may
// cut the largest holder, or refuse), then the budget itself, waiting as
// acquire does.
func (r *growth) grow(ctx context.Context, total int) error {
	g := r.g
	if err := g.takeShare(r.h, int64(total)); err != nil {
		return err
	}
	if err := g.acquire(ctx, int64(total-r.reserved), r.small, r.reserved > 0); err != nil {
		return err
	}
	g.queued.Add(float64(total - r.reserved))
	r.reserved = total
	return nil
}

// growUpTo moves the reservation to total bytes if the shares and the
// budget have them now, and otherwise to least, waiting as grow does: the
// bytes the kernel holds (readArrived) are reserved at once only when that
// makes nobody wait or close, so a frame never queues for the budget with
// more than one chunk ahead of what its bufio buffer shows.
func (r *growth) growUpTo(ctx context.Context, total, least int) (int, error) {
	if total > least && r.tryGrow(total) {
		return total, nil
	}
	return least, r.grow(ctx, least)
}

// tryGrow is grow to total without waiting, closing or refusing: false
// when the budget or a share has no room for it now.
func (r *growth) tryGrow(total int) bool {
	g, k := r.g, int64(total-r.reserved)
	if !g.budget.TryAcquire(k) && !(r.small && g.takeReserve(k)) {
		return false
	}
	g.queued.Add(float64(k))
	if !g.tryTakeShare(r.h, int64(total)) {
		g.release(int(k), r.small)
		return false
	}
	r.reserved = total
	return true
}

// frameLimit is the most of the budget one frame may take.
func (g *guard) frameLimit(small bool) int64 {
	if small {
		return g.lim.QueuedMaxRequestBytes
	}
	return g.lim.QueuedMaxRequestBytes - g.reserve
}

// acquire takes k bytes of the budget, from the small-frame reserve for a
// small frame when the rest is spent. Bounded (the caller holds part of a
// frame), it waits at most GrowWait, and only one such caller waits at a
// time: the others queue behind it holding what they have, so that when it
// gives up, its bytes go to the next instead of every waiter timing out at
// once.
func (g *guard) acquire(ctx context.Context, k int64, small, bounded bool) error {
	if g.budget.TryAcquire(k) || (small && g.takeReserve(k)) {
		return nil
	}
	if !bounded {
		if err := g.budget.Acquire(ctx, k); err != nil {
			return fmt.Errorf("wait for request buffer budget: %w", err)
		}
		return nil
	}
	if g.budget.TryAcquire(k) {
		return nil
	}
	select {
	case g.growing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for request buffer budget: %w", ctx.Err())
	}
	defer func() { <-g.growing }()
	wctx, cancel := context.WithTimeout(ctx, g.lim.GrowWait)
	defer cancel()
	if err := g.budget.Acquire(wctx, k); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for request buffer budget: %w", ctx.Err())
		}
		return &badFrameError{key: -1, reason: badBudgetWait,
			err: fmt.Errorf("frame half read: no budget for %d more bytes within %v", k, g.lim.GrowWait)}
	}
	return nil
}

// bufPool is the part of kwire.BufPool the guard uses.
type bufPool interface {
	ReadGrowingObserved(r io.Reader, n int, reserve func(total int) error, obs kwire.Observer) (*[]byte, error)
	Get(n int) *[]byte
	Cap(n int) int
	Spare(n int) *[]byte
	Put(*[]byte)
}

// put returns a frame from readFrame and its reservation.
func (g *guard) put(bufs bufPool, buf *[]byte) {
	g.release(len(*buf), len(*buf) <= SmallFrameBytes)
	bufs.Put(buf)
}

// takeReserve takes k bytes of the small-frame reserve if they are free.
func (g *guard) takeReserve(k int64) bool {
	for {
		used := g.inRes.Load()
		if used+k > g.reserve {
			return false
		}
		if g.inRes.CompareAndSwap(used, used+k) {
			return true
		}
	}
}

// release gives back n bytes of a frame. A small frame's bytes refill the
// reserve first, whichever part they came from: the reserve then never
// holds more than the small frames outstanding, so what a large frame
// gives back is always held outside it.
func (g *guard) release(n int, small bool) {
	g.queued.Sub(float64(n))
	k := int64(n)
	for small && k > 0 {
		used := g.inRes.Load()
		r := min(k, used)
		if r == 0 || g.inRes.CompareAndSwap(used, used-r) {
			k -= r
			break
		}
	}
	if k > 0 {
		g.budget.Release(k)
	}
}

// busy reports whether requests other than the one being read are
// outstanding (the reader holds one ticket while it reads).
func (s *sequencer) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next-s.free > 1
}
