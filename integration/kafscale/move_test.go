package kafscale

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/adminapi"
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
// partitions are free to move), then its process is gone. It returns the
// index in the served log from which no request may reach x: the proxy
// dropped its connections to x when the snapshot changed, and requests
// written before then have been handled by the time x's revocation is
// routed (kfake serves each connection in order).
func (e *env) scaleDown(ctx context.Context, x int32, ownsLeases bool) int {
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
	return len(e.servedLog())
}

// checkServed asserts that reads reached only a partition's lease owner
// (or, unowned, one broker), and nothing reached broker gone from index
// goneFrom on.
func (e *env) checkServed(topic string, gone int32, goneFrom int) {
	e.t.Helper()
	log := e.servedLog()
	refused := 0
	for i, s := range log {
		if s.topic != topic {
			continue
		}
		if i >= goneFrom && s.node == gone {
			e.t.Errorf("%s for %s/%d reached broker %d after it left (lease owner then %d, request %d of %d)", kmsg.NameForKey(s.key), s.topic, s.part, gone, s.owner, i, len(log))
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
