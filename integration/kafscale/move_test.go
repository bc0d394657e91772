package kafscale

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
)

// busiest returns the broker holding the most leases of topic's
// partitions (the lowest id among equals) and how many it holds.
func (e *env) busiest(ctx context.Context, topic string) (int32, int) {
	e.t.Helper()
	counts := map[int32]int{}
	for p := range e.topics[topic].Partitions {
		if o := e.owner(ctx, topic, p); o >= 0 {
			counts[o]++
		}
	}
	best, n := int32(-1), 0
	for id, c := range counts {
		if c > n || (c == n && id < best) {
			best, n = id, c
		}
	}
	return best, n
}

// scaleDown takes broker x away as KafScale does on a graceful scale-down:
// the operator's snapshot stops listing it (its partitions get retriable
// errors, and /readyz names it), it shuts down (revoking its leases: its
// partitions are free to move), then its process is gone. It returns how
// many requests the proxy had queued for x by then: no more may follow.
// (Requests the proxy wrote before may still reach kfake later: kfake
// serves a removed node's open connections, and its one loop can lag.)
func (e *env) scaleDown(ctx context.Context, x int32, ownsLeases bool) float64 {
	e.t.Helper()
	var rest []int32
	for _, id := range e.liveIDs() {
		if id != x {
			rest = append(rest, id)
		}
	}
	rev := e.putSnapshot(ctx, rest...)
	r := e.waitReady("the snapshot without broker "+fmt.Sprint(x), func(r adminapi.Readiness) bool { return r.Revision >= rev })
	if ownsLeases && !slices.Equal(r.MissingBrokers, []int32{x}) {
		e.t.Errorf("/readyz missing_brokers = %v while broker %d holds leases but is not in the snapshot", r.MissingBrokers, x)
	}
	e.mu.Lock()
	b := e.brokers[x]
	delete(e.brokers, x)
	delete(e.addrs, x)
	for k := range e.held {
		if k.node == x {
			delete(e.held, k)
		}
	}
	e.mu.Unlock()
	if err := b.Shutdown(ctx); err != nil {
		e.t.Fatal(err)
	}
	if err := e.fake.RemoveNode(x); err != nil {
		e.t.Fatalf("kfake: remove node %d: %v", x, err)
	}
	resp, err := e.etcd.Get(ctx, "/")
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitReady("the leases of broker "+fmt.Sprint(x)+" revoked", func(r adminapi.Readiness) bool {
		return r.Revision >= resp.Header.Revision && len(r.MissingBrokers) == 0
	})
	return e.sentTo(x)
}

// sentTo reads the proxy's count of requests queued for broker id.
func (e *env) sentTo(id int32) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatalf("gather proxy metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_upstream_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "broker" && l.GetValue() == fmt.Sprint(id) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// checkServed asserts that reads reached only a partition's lease owner,
// and that the proxy sent broker gone nothing more after it left (it had
// sent sentAtExit by then).
func (e *env) checkServed(topic string, gone int32, sentAtExit float64) {
	e.t.Helper()
	if sentAtExit == 0 {
		e.t.Errorf("the proxy counts no request for broker %d, which held leases: the check below could not fail", gone)
	}
	if n := e.sentTo(gone); n != sentAtExit {
		e.t.Errorf("the proxy queued %v requests for broker %d after it left the snapshot and revoked its leases", n-sentAtExit, gone)
	}
	log := e.servedLog()
	refused := 0
	for _, s := range log {
		if s.topic != topic {
			continue
		}
		switch {
		case s.key == int16(kmsg.Produce) && s.owner != s.node:
			refused++ // NOT_LEADER_OR_FOLLOWER, retried by the proxy
		case s.key != int16(kmsg.Produce) && s.owner >= 0 && s.owner != s.node:
			e.t.Errorf("%s for %s/%d reached broker %d while broker %d leased it: KafScale would serve stale data",
				kmsg.NameForKey(s.key), s.topic, s.part, s.node, s.owner)
		}
	}
	e.t.Logf("%d partition requests reached brokers; %d produces refused and retried", len(log), refused)
}
