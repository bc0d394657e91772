package upstream

// Keeping acks=0 produces in order on on-demand connections: a request the
// broker never answers leaves its connection as soon as it is written, and
// the client connection's next request could then go out on another
// connection and be appended first, since a broker that answers in order
// still works on its connections in parallel. So the written request keeps
// its affinity's hold on the connection (the owner's release waits) until
// the broker has shown it processed it: by answering any request written
// after it, which, answering in order, it does only once the earlier ones
// are done. When nothing else follows, a barrier does: an ApiVersions
// request, the cheapest one every broker answers, queued behind it. One
// barrier queued and not yet written covers every acks=0 request written
// before it goes out; it holds no in-flight token, and counts in
// kproxy_upstream_barriers_total, not as a request.

// confirms tells whether c's acks=0 requests wait to be confirmed: only an
// on-demand connection is given up when its requests leave (a shared one
// stays, a dedicated one is its affinity's), and only a broker answering
// in order confirms, by an answer, what came before it.
func (c *conn) confirms() bool {
	_, onDemand := c.owner.(*serialConns)
	return onDemand && !c.unordered
}

// holdUnconfirmedLocked keeps r's release (written, answered nothing)
// until a later answer on c: r is forgotten as a request, but its owner
// keeps its place, and a barrier follows it unless one is queued already.
func (c *conn) holdUnconfirmedLocked(r *wireReq) {
	c.forgetLocked(r)
	c.unconfirmed = append(c.unconfirmed, r.wseq)
	if !c.barrierQueued {
		c.queueBarrierLocked()
	}
}

// confirmLocked releases the held acks=0 requests written before the one
// with write sequence wseq, which the broker has just answered.
func (c *conn) confirmLocked(wseq uint64) {
	n := 0
	for n < len(c.unconfirmed) && c.unconfirmed[n] < wseq {
		n++
	}
	c.releaseUnconfirmedLocked(n)
}

// releaseUnconfirmedLocked releases the first n held acks=0 requests.
func (c *conn) releaseUnconfirmedLocked(n int) {
	for range n {
		c.owner.released(c, c.err != nil)
	}
	rest := copy(c.unconfirmed, c.unconfirmed[n:])
	c.unconfirmed = c.unconfirmed[:rest]
}

// queueBarrierLocked queues an ApiVersions request whose answer nobody
// waits for (an orphan from the start: the reader gives its frame back).
func (c *conn) queueBarrierLocked() {
	cfg := &c.bp.p.cfg
	r := &wireReq{c: c, barrier: true, orphan: true, done: make(chan struct{}), patience: cfg.ReadTimeout}
	r.corr = c.allocCorrLocked()
	r.frame = c.bp.p.bufs.Get(64 + len(cfg.ClientID))
	*r.frame = appendHello(*r.frame, r.corr, &cfg.ClientID)
	r.size = len(*r.frame)
	c.inflight[r.corr] = r
	c.queue = append(c.queue, r)
	c.barrierQueued = true
	c.bp.m.barriers.Inc()
}
