package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Owners counts the partitions of topic each broker owns now.
func (c *Cluster) Owners(ctx context.Context, topic string) (map[int32]int, error) {
	owners, err := c.rig.Owners(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int{}
	for _, b := range owners {
		out[b]++
	}
	return out, nil
}

// EtcdLeader is the index in Members of the current raft leader.
func (c *Cluster) EtcdLeader(ctx context.Context) (int, error) {
	var errs []error
	for i, m := range c.Members {
		if !m.Proc.Running() || m.Proc.Paused() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.cli.Status(sctx, "http://"+m.ClientAddr)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("status of %s: %w", m.Name, err))
			continue
		}
		if st.Leader != 0 && st.Leader == st.Header.MemberId {
			return i, nil
		}
		// The answering member names the leader by id; find its index.
		for j, other := range c.Members {
			if j == i || !other.Proc.Running() {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ost, err := c.cli.Status(sctx, "http://"+other.ClientAddr)
			cancel()
			if err == nil && ost.Header.MemberId == st.Leader {
				return j, nil
			}
		}
	}
	return -1, fmt.Errorf("no etcd leader found: %w", errors.Join(errs...))
}

// Compact compacts etcd's history up to the current revision, so every
// watcher that lags behind must re-list.
func (c *Cluster) Compact(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.layout.Prefix()+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read revision: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := c.cli.Compact(ctx, rev); err != nil {
		return rev, fmt.Errorf("compact at %d: %w", rev, err)
	}
	return rev, nil
}

// Heal undoes every fault: relays forward again, paused processes resume,
// dead ones start again, and every proxy is ready and sees every broker.
func (c *Cluster) Heal(ctx context.Context) error {
	var errs []error
	for _, b := range c.Brokers {
		for _, r := range b.Relays {
			r.Heal()
		}
	}
	for _, m := range c.Members {
		if m.Proc.Paused() {
			errs = append(errs, m.Proc.Resume())
		}
	}
	for _, b := range c.Brokers {
		if b.Proc.Paused() {
			errs = append(errs, b.Proc.Resume())
		}
	}
	for _, p := range c.Proxies {
		if p.Proc.Paused() {
			errs = append(errs, p.Proc.Resume())
		}
	}
	if err := c.startMissingMembers(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, b := range c.Brokers {
		if !b.Proc.Running() {
			errs = append(errs, c.StartBroker(ctx, b))
		}
	}
	for _, p := range c.Proxies {
		if !p.Proc.Running() {
			errs = append(errs, c.StartProxy(ctx, p, len(c.Brokers)))
		}
	}
	for _, p := range c.Proxies {
		errs = append(errs, c.rig.WaitProxy(ctx, p, len(c.Brokers)))
	}
	return errors.Join(errs...)
}

// StartMember starts a stopped etcd member and waits until it is ready.
func (c *Cluster) StartMember(ctx context.Context, m *Member) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return m.Proc.Start(ctx)
}

func (c *Cluster) startMissingMembers(ctx context.Context) error {
	var errs []error
	for _, m := range c.Members {
		if !m.Proc.Running() {
			errs = append(errs, c.StartMember(ctx, m))
		}
	}
	return errors.Join(errs...)
}
