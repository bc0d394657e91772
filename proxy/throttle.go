package proxy

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/quota"
)

// quotaCost is what a request charges to its client's quotas, gathered as
// it is read and handled.
type quotaCost struct {
	client   string
	begin    time.Duration // the proxy's own handling on the reader (Begin)
	throttle time.Duration // known before handling (a Produce's byte rate)
}

// quotaLookup is one connection's resolved quotas, valid while the table
// in force and the connection's user and client id stay the same: a
// request looks them up without allocating.
type quotaLookup struct {
	t            *quota.Table
	user, client string
	m            *[quota.NumTypes]quota.Match
}

// quotas returns the quotas that apply to the connection's user and client.
func (c *clientConn) quotas(q *quota.Manager, client string) *[quota.NumTypes]quota.Match {
	t, user := q.Table(), c.quotaUser()
	if l := c.quotaCache.Load(); l != nil && l.t == t && l.user == user && l.client == client {
		return l.m
	}
	l := &quotaLookup{t: t, user: user, client: client, m: t.Lookup(user, client)}
	c.quotaCache.Store(l)
	return l.m
}

// quotaUser is the user quotas are kept by, as Kafka keeps them: the
// connection's principal's name (ANONYMOUS until it authenticates; a
// re-authentication moves later requests to the new user's quotas).
func (c *clientConn) quotaUser() string { return c.info.Principal().Name }

// chargeProduce charges a Produce request's size to the producer byte
// rate as it is read, and mutes the connection at once for the throttle:
// requests already read are in flight, so waiting for the response (as
// Kafka, which handles one request per connection at a time, can) would
// let a pipelining producer run over its quota.
func (c *clientConn) chargeProduce(key int16, frameBytes int, cost *quotaCost) {
	q := c.s.d.quotas
	if q == nil || key != int16(kmsg.Produce) {
		return
	}
	cost.throttle = q.Charge(c.quotas(q, cost.client), quota.Usage{ProduceBytes: frameBytes})
	c.mute(cost.throttle)
}

// chargeReply charges the reply (Fetch bytes) and the request's handling
// time, mutes the connection for the throttle they earn, and raises the
// reply's throttle_time_ms to what is left of the connection's mute:
// Kafka's KIP-219, the response goes out at once and the client's next
// request waits (waitMuted).
func (c *clientConn) chargeReply(key, version int16, reply *apis.Reply, cost quotaCost) {
	q := c.s.d.quotas
	if q == nil {
		return
	}
	u := quota.Usage{RequestTime: cost.begin}
	if key == int16(kmsg.Fetch) {
		u.FetchBytes = bodyLen(reply.Body, reply.Parts)
	}
	c.mute(q.Charge(c.quotas(q, cost.client), u))
	if cost.throttle <= 0 && c.mutedUntil.Load() == 0 {
		return // never throttled: the common case stays cheap
	}
	// What is left of the mute, not the whole throttle: a Produce's began
	// when it was read, and a client that waited the whole throttle after
	// the response would lose the request's round trip each time.
	if d := time.Until(time.Unix(0, c.mutedUntil.Load())); d > 0 && !reply.NoResponse {
		apis.SetThrottle(key, version, reply, quota.Millis(d))
	}
}

// mute holds the connection's next request for d from now.
func (c *clientConn) mute(d time.Duration) {
	if d <= 0 {
		return
	}
	until := time.Now().Add(d).UnixNano()
	for {
		old := c.mutedUntil.Load()
		if old >= until || c.mutedUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// waitMuted holds the reader while the connection is throttled; it ends
// early, with the reason, when the connection does.
func (c *clientConn) waitMuted() error {
	wait := time.Until(time.Unix(0, c.mutedUntil.Load()))
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}

func derefClientID(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
