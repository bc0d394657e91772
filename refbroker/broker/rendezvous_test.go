package broker

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/routing"
)

// TestRendezvousAgreesWithRouting: for an unowned partition or group, the
// broker a stub broker names in Metadata and FindCoordinator is the broker a
// proxy routes to, for every live set. Otherwise a client that talks to the
// brokers directly and one that goes through a proxy would make two brokers
// acquire the same partition in turn.
func TestRendezvousAgreesWithRouting(t *testing.T) {
	l := layout.New("/agree")
	rng := rand.New(rand.NewPCG(1, 2))
	const sets, parts, groups = 60, 200, 50
	for set := range sets {
		view := newMetaView(l, slog.New(slog.DiscardHandler))
		tb := routing.NewTable()
		n := 1 + rng.IntN(40)
		ids := map[int32]bool{}
		for len(ids) < n {
			id := rng.Int32N(2000)
			if set%3 == 0 {
				id = int32(len(ids)) // dense ids 0..n-1, as most clusters have
			}
			ids[id] = true
		}
		for id := range ids {
			info := layout.BrokerInfo{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 9000+id)}
			view.Put(&mvccpb.KeyValue{Key: []byte(l.BrokerKey(id)), Value: []byte(layout.Marshal(info)), Version: 1})
			tb.SetBroker(routing.Broker{ID: id, Addr: info.Addr})
		}
		if got := len(view.liveBrokers()); got != n {
			t.Fatalf("set %d: view holds %d brokers, want %d", set, got, n)
		}
		topic := fmt.Sprintf("topic-%d", set)
		for p := range int32(parts) {
			want, ok := tb.Route(topic, p, -1)
			got, _, owned := view.leader(partlog.TP{Topic: topic, Partition: p}, -7)
			if !ok || owned || got != want {
				t.Fatalf("set %d (%d brokers), %s/%d: broker names %d (owned %v), proxy routes to %d (%v)",
					set, n, topic, p, got, owned, want, ok)
			}
		}
		for g := range groups {
			group := fmt.Sprintf("group-%d-%d", set, g)
			want, ok := tb.RouteGroup(group, -1)
			if got := view.coordinator(group, -7); !ok || got != want {
				t.Fatalf("set %d, group %s: broker names %d, proxy routes to %d (%v)", set, group, got, want, ok)
			}
		}
	}
}

func TestRendezvousWithoutBrokersNamesSelf(t *testing.T) {
	view := newMetaView(layout.New(""), slog.New(slog.DiscardHandler))
	if got, _, owned := view.leader(partlog.TP{Topic: "t", Partition: 0}, 4); got != 4 || owned {
		t.Fatalf("leader with no live broker = %d (owned %v), want self 4", got, owned)
	}
	if got := view.coordinator("g", 4); got != 4 {
		t.Fatalf("coordinator with no live broker = %d, want self 4", got)
	}
}
