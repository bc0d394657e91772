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

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

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
	req := kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: softwareName, ClientSoftwareVersion: softwareVersion}
	r := &wireReq{c: c, barrier: true, orphan: true, done: make(chan struct{}), patience: cfg.ReadTimeout}
	r.frame = c.bp.p.bufs.Get(64 + len(cfg.ClientID))
	*r.frame = kwire.AppendRequestHeader(*r.frame, keyApiVersions, req.Version, 0, &cfg.ClientID, true)
	*r.frame = req.AppendTo(*r.frame)
	kwire.FinishFrame(*r.frame)
	r.size = len(*r.frame)
	r.corr = c.allocCorrLocked()
	binary.BigEndian.PutUint32((*r.frame)[kwire.CorrOffset:], uint32(r.corr))
	c.inflight[r.corr] = r
	c.queue = append(c.queue, r)
	c.barrierQueued = true
	c.bp.m.barriers.Inc()
}
