package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/cluster"
)

// busyBroker picks a running broker: the one owning the most partitions of
// the topic (the owner of busy partitions), or with anyOne sometimes any.
func (n *Nemesis) busyBroker(ctx context.Context, anyOne bool) (*cluster.Broker, int, error) {
	var running []*cluster.Broker
	for _, b := range n.c.Brokers {
		if b.Proc.Running() && !b.Proc.Paused() {
			running = append(running, b)
		}
	}
	if len(running) == 0 {
		return nil, 0, errors.New("no running broker")
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	owned, err := n.c.Owners(octx, n.cfg.Topic)
	cancel()
	if err != nil || (anyOne && n.rng.IntN(4) == 0) {
		b := running[n.rng.IntN(len(running))]
		return b, owned[b.ID], nil
	}
	best := running[n.rng.IntN(len(running))]
	for _, b := range running {
		if owned[b.ID] > owned[best.ID] {
			best = b
		}
	}
	return best, owned[best.ID], nil
}

func brokerTarget(b *cluster.Broker, owned int) string {
	return fmt.Sprintf("broker-%d (owns %d partitions)", b.ID, owned)
}

func (n *Nemesis) killBroker(ctx context.Context) (fault, error) {
	b, owned, err := n.busyBroker(ctx, true)
	if err != nil {
		return fault{}, err
	}
	if err := b.Proc.Kill(); err != nil {
		return fault{}, err
	}
	return fault{
		target: brokerTarget(b, owned),
		hold:   n.between(time.Second, 2*n.cfg.LeaseTTL),
		heal:   func(ctx context.Context) error { return n.c.StartBroker(ctx, b) },
	}, nil
}

func (n *Nemesis) pauseBroker(ctx context.Context) (fault, error) {
	b, owned, err := n.busyBroker(ctx, false)
	if err != nil {
		return fault{}, err
	}
	if err := b.Proc.Pause(); err != nil {
		return fault{}, err
	}
	return fault{
		target: brokerTarget(b, owned),
		hold:   n.pastLease(),
		heal:   func(context.Context) error { return b.Proc.Resume() },
	}, nil
}

// freezeBroker stalls a partition owner the way a paused VM stalls: first its
// etcd connections stop delivering (so commits it sends from then on are
// held in flight), then the process stops. Past its lease a successor takes
// over; on heal the held bytes reach etcd first, while the broker is still
// stopped, so its stale commits arrive after the successor's writes and
// cannot be cancelled by its own timers: the fence must refuse them.
func (n *Nemesis) freezeBroker(ctx context.Context) (fault, error) {
	b, owned, err := n.busyBroker(ctx, false)
	if err != nil {
		return fault{}, err
	}
	for _, r := range b.Relays {
		r.Pause()
	}
	lead := n.between(100*time.Millisecond, 500*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(lead):
	}
	if err := b.Proc.Pause(); err != nil {
		for _, r := range b.Relays {
			r.Heal()
		}
		return fault{}, err
	}
	return fault{
		target: brokerTarget(b, owned) + fmt.Sprintf(" etcd held %s before SIGSTOP", lead.Round(time.Millisecond)),
		hold:   n.pastLease(),
		heal: func(ctx context.Context) error {
			for _, r := range b.Relays {
				r.Heal()
			}
			select { // let the held commits land before the broker runs again
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
			return b.Proc.Resume()
		},
	}, nil
}

func (n *Nemesis) killEtcd(ctx context.Context, leader bool) (fault, error) {
	idx := -1
	if leader {
		var err error
		if idx, err = n.c.EtcdLeader(ctx); err != nil {
			return fault{}, err
		}
	} else {
		var up []int
		for i, m := range n.c.Members {
			if m.Proc.Running() {
				up = append(up, i)
			}
		}
		if len(up) < len(n.c.Members) {
			return fault{}, errors.New("an etcd member is already down")
		}
		idx = up[n.rng.IntN(len(up))]
	}
	m := n.c.Members[idx]
	if err := m.Proc.Kill(); err != nil {
		return fault{}, err
	}
	target := m.Name
	if leader {
		target += " (leader)"
	}
	return fault{
		target: target,
		hold:   n.between(2*time.Second, 2*n.cfg.LeaseTTL),
		heal:   func(ctx context.Context) error { return n.c.StartMember(ctx, m) },
	}, nil
}

func (n *Nemesis) killProxy(ctx context.Context) (fault, error) {
	p := n.c.Proxies[n.rng.IntN(len(n.c.Proxies))]
	if err := p.Proc.Kill(); err != nil {
		return fault{}, err
	}
	return fault{
		target: fmt.Sprintf("proxy-%d", p.Index+1),
		hold:   n.between(time.Second, 3*time.Second),
		heal: func(ctx context.Context) error {
			// Ready with at least one broker: other faults may not be healed
			// by then (they are, one at a time, but brokers may be restarting).
			return n.c.StartProxy(ctx, p, 1)
		},
	}, nil
}

// relayFault cuts (or delays) every etcd path of one broker.
func (n *Nemesis) relayFault(ctx context.Context, delay bool) (fault, error) {
	b, owned, err := n.busyBroker(ctx, false)
	if err != nil {
		return fault{}, err
	}
	target := brokerTarget(b, owned)
	hold := n.pastLease()
	if delay {
		d := n.between(200*time.Millisecond, n.cfg.LeaseTTL/2)
		for _, r := range b.Relays {
			r.Delay(d)
		}
		target += fmt.Sprintf(" delay %s", d)
		hold = n.between(3*time.Second, 3*n.cfg.LeaseTTL)
	} else {
		for _, r := range b.Relays {
			r.Cut()
		}
	}
	return fault{
		target: target,
		hold:   hold,
		heal: func(context.Context) error {
			for _, r := range b.Relays {
				r.Heal()
			}
			return nil
		},
	}, nil
}
