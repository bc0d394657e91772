package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

// Session is one broker's etcd lease plus the resources it holds under it.
// It runs its own keepalive loop (not clientv3's KeepAlive, whose idea of
// expiry counts from when an answer arrives) and renews itself after an
// expiry, so a broker that was paused past its lease serves again once it can
// reach etcd. Keepalives travel on their own etcd connection (when
// Config.EtcdConfig is set) and acquisitions wait while a keepalive is late,
// so bulk traffic cannot starve the lease. Acquisitions and commits go through
// batchers that put many resources into one etcd transaction. All methods are
// safe for concurrent use.
type Session struct {
	cfg    Config
	cli    *clientv3.Client // acquisitions, commits, registered keys
	kaCli  *clientv3.Client // grants, keepalives, revokes of expired leases
	ownKA  bool             // kaCli was built by the session: Close closes it
	log    *slog.Logger
	losses *lossQueue
	stats  batchStats
	acq    *batcher
	com    *batcher
	bg     sync.WaitGroup // batchers

	ctx    context.Context // cancelled by Close; bounds every loop call
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has stopped

	mu         sync.RWMutex
	leaseID    clientv3.LeaseID // 0 while the session has no lease
	deadline   time.Time        // local expiry: sendTime + TTL - SafetyMargin
	ttl        time.Duration    // as granted by the server
	lastSend   time.Time        // send time of the last keepalive or grant
	owned      map[string]*Ownership
	registered map[string]string
	regDirty   bool      // registered keys not yet put under the current lease
	retryAt    time.Time // after a failed keepalive: when to try again
	closed     bool

	regMu     sync.Mutex // orders puts of registered keys across lease changes
	closeOnce sync.Once
}

// NewSession grants the session lease and starts the keepalive loop. Close
// stops it.
func NewSession(ctx context.Context, cfg Config) (*Session, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Session{
		cfg:        cfg,
		cli:        cfg.Client,
		kaCli:      cfg.Client,
		log:        cfg.Logger.With("broker", cfg.BrokerID),
		losses:     newLossQueue(),
		done:       make(chan struct{}),
		owned:      make(map[string]*Ownership),
		registered: make(map[string]string),
	}
	if cfg.EtcdConfig != nil {
		kc := *cfg.EtcdConfig
		kaCli, err := clientv3.New(kc)
		if err != nil {
			return nil, fmt.Errorf("new lease session for broker %d: keepalive client: %w", cfg.BrokerID, err)
		}
		s.kaCli, s.ownKA = kaCli, true
	}
	if err := s.grant(ctx); err != nil {
		s.closeKeepaliveClient()
		return nil, fmt.Errorf("new lease session for broker %d: %w", cfg.BrokerID, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.acq = s.newBatcher("acquire", cfg.AcquireInFlight, s.keepaliveLate)
	s.com = s.newBatcher("commit", cfg.CommitInFlight, nil)
	for _, b := range []*batcher{s.acq, s.com} {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			b.run(s.ctx)
		}()
	}
	go s.run()
	return s, nil
}

func (s *Session) newBatcher(name string, inFlight int, hold func() bool) *batcher {
	return &batcher{
		name: name, cli: s.cli, maxOps: s.cfg.MaxTxnOps, maxBytes: s.cfg.MaxTxnBytes,
		timeout: s.cfg.OpTimeout, hold: hold, log: s.log, stats: &s.stats,
		slots: make(chan struct{}, inFlight), wake: make(chan struct{}, 1),
	}
}

// keepaliveLate reports that the last answered keepalive is older than it
// should be: acquisitions wait so that the keepalive gets etcd first.
func (s *Session) keepaliveLate() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.leaseID == 0 {
		return false // acquisitions fail at once without a lease
	}
	return s.deadline.Sub(s.cfg.Now()) < (s.ttl-s.cfg.SafetyMargin)/2
}

func (s *Session) closeKeepaliveClient() {
	if s.ownKA {
		s.kaCli.Close()
	}
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	return Stats{
		SessionLosses:  s.losses.sessionLosses.Load(),
		OwnershipsLost: s.losses.ownershipsLost.Load(),
		Txns:           s.stats.txns.Load(),
		TxnItems:       s.stats.items.Load(),
		Overloads:      s.stats.overloads.Load(),
	}
}

// LeaseID is the current session lease, 0 while the session is renewing.
func (s *Session) LeaseID() clientv3.LeaseID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.leaseID
}

// Deadline is the local expiry of the current lease (zero without a lease).
func (s *Session) Deadline() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.leaseID == 0 {
		return time.Time{}
	}
	return s.deadline
}

// Valid reports whether the session holds a lease that has not passed its
// local deadline.
func (s *Session) Valid() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.validLocked()
}

func (s *Session) validLocked() bool {
	return !s.closed && s.leaseID != 0 && s.cfg.Now().Before(s.deadline)
}

// LossReady receives a token whenever losses are waiting for TakeLosses:
// resources the session stopped holding without being asked to (an expiry,
// reported as one Loss covering everything the lease held, or a fenced
// commit). Nothing is ever dropped and the reporter never blocks. Closed by
// Close.
func (s *Session) LossReady() <-chan struct{} { return s.losses.ready }

// TakeLosses returns and forgets every loss reported since the last call.
func (s *Session) TakeLosses() []Loss { return s.losses.take() }

// Register puts key=value under the session lease and puts it again under
// every new lease the session obtains, until Close. With no lease at the
// moment the key is put as soon as one is granted. A failed put is retried by
// the keepalive loop; the error is still returned.
func (s *Session) Register(ctx context.Context, key, value string) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("register %s: %w", key, ErrClosed)
	}
	s.registered[key] = value
	id := s.leaseID
	s.mu.Unlock()
	if id == 0 {
		return nil
	}
	if _, err := s.cli.Put(ctx, key, value, clientv3.WithLease(id)); err != nil {
		s.mu.Lock()
		s.regDirty = true
		s.mu.Unlock()
		return fmt.Errorf("register %s under lease %x: %w", key, id, err)
	}
	return nil
}

// RegisterBroker registers this broker's BrokerInfo at its BrokerKey.
func (s *Session) RegisterBroker(ctx context.Context, info layout.BrokerInfo) error {
	return s.Register(ctx, s.cfg.Layout.BrokerKey(s.cfg.BrokerID), layout.Marshal(info))
}

// Partition is PartitionResource under the session's layout.
func (s *Session) Partition(topic string, partition int32, stateKey string) Resource {
	return PartitionResource(s.cfg.Layout, topic, partition, stateKey)
}

// Group is GroupResource under the session's layout.
func (s *Session) Group(group, stateKey string) Resource {
	return GroupResource(s.cfg.Layout, group, stateKey)
}

// BrokerID is the broker the session acquires for.
func (s *Session) BrokerID() int32 { return s.cfg.BrokerID }

// Close stops the keepalive loop and revokes the lease, which deletes every
// owner key and registered key at once so successors need not wait for the
// TTL. Held ownerships are forgotten without Loss reports.
func (s *Session) Close() { s.close(true) }

// Abandon stops the session like a crash would: no more keepalives and no
// revoke, so the owner keys stay until the server expires the lease. Brokers
// use it when they must stop without handing over (tests of failover, and
// shutdowns where etcd is already unreachable).
func (s *Session) Abandon() { s.close(false) }

func (s *Session) close(revoke bool) {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		s.mu.Lock()
		id := s.leaseID
		s.closed, s.leaseID = true, 0
		for _, o := range s.owned {
			o.markLost()
		}
		clear(s.owned)
		s.mu.Unlock()
		s.bg.Wait()
		s.losses.close()
		if !revoke {
			s.closeKeepaliveClient()
			return
		}
		defer s.closeKeepaliveClient()
		if id == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := s.cli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.log.Warn("revoke lease on close", "lease", fmt.Sprintf("%x", id), "err", err)
		}
	})
}

// run is the keepalive loop: one KeepAliveOnce every TTL/3 from the previous
// send, and an expiry check exactly at the local deadline.
func (s *Session) run() {
	defer close(s.done)
	t := time.NewTimer(s.nextWait())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.tick()
		t.Reset(s.nextWait())
	}
}

func (s *Session) nextWait() time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.cfg.Now()
	if s.leaseID == 0 {
		return s.retryInterval()
	}
	wait := s.lastSend.Add(s.ttl / 3).Sub(now)
	if !s.retryAt.IsZero() {
		wait = s.retryAt.Sub(now)
	}
	if untilDeadline := s.deadline.Sub(now); untilDeadline < wait {
		wait = untilDeadline
	}
	return max(wait, time.Millisecond)
}

func (s *Session) retryInterval() time.Duration {
	return min(s.cfg.TTL/3, time.Second)
}

func (s *Session) tick() {
	s.mu.RLock()
	id, deadline, ttl, dirty := s.leaseID, s.deadline, s.ttl, s.regDirty
	s.mu.RUnlock()
	if id == 0 {
		s.renew()
		return
	}
	if !s.cfg.Now().Before(deadline) {
		s.expire(id, fmt.Errorf("lease %x: local deadline passed without an answered keepalive", id))
		s.renew()
		return
	}
	if !s.keepAlive(id, deadline, ttl) {
		s.renew()
		return
	}
	if dirty {
		s.putRegistered()
	}
}

// keepAlive sends one keepalive and reports whether the lease is still usable.
func (s *Session) keepAlive(id clientv3.LeaseID, deadline time.Time, ttl time.Duration) bool {
	send := s.cfg.Now()
	s.mu.Lock()
	s.lastSend = send
	s.mu.Unlock()
	// Never wait past the deadline: an answer after it cannot revive the lease.
	timeout := min(ttl/3, deadline.Sub(send))
	ctx, cancel := context.WithTimeout(s.ctx, max(timeout, 10*time.Millisecond))
	resp, err := s.kaCli.KeepAliveOnce(ctx, id)
	cancel()
	switch {
	case err == nil:
		s.mu.Lock()
		s.retryAt = time.Time{}
		s.mu.Unlock()
		return s.extend(id, send, time.Duration(resp.TTL)*time.Second)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.expire(id, fmt.Errorf("lease %x: %w", id, err))
		return false
	default:
		if s.ctx.Err() != nil {
			return true // closing; Close takes over
		}
		// Overload and transient errors alike: try again soon rather than
		// a third of a TTL later, while the deadline leaves room.
		s.log.Debug("keepalive failed", "lease", fmt.Sprintf("%x", id), "err", err, "overload", overloaded(err))
		if !s.cfg.Now().Before(deadline) {
			s.expire(id, fmt.Errorf("lease %x: no keepalive answered before the local deadline: %w", id, err))
			return false
		}
		s.mu.Lock()
		s.retryAt = s.cfg.Now().Add(min(ttl/20, 250*time.Millisecond))
		s.mu.Unlock()
		return true
	}
}

// extend moves the deadline to send+ttl-margin. Once the deadline has passed
// the lease is finished: a late answer does not revive it, so Owns never
// flips from false back to true for the same lease.
func (s *Session) extend(id clientv3.LeaseID, send time.Time, ttl time.Duration) bool {
	s.mu.Lock()
	if s.leaseID != id {
		s.mu.Unlock()
		return true
	}
	if !s.cfg.Now().Before(s.deadline) {
		s.mu.Unlock()
		s.expire(id, fmt.Errorf("lease %x: keepalive answered after the local deadline", id))
		return false
	}
	if d := send.Add(ttl - s.cfg.SafetyMargin); d.After(s.deadline) {
		s.deadline = d
	}
	s.ttl = ttl
	s.mu.Unlock()
	return true
}

// expire forgets lease id and every ownership under it, reporting each as a
// Loss, then revokes the lease (best effort) so its keys go now rather than
// at the server's expiry.
func (s *Session) expire(id clientv3.LeaseID, reason error) {
	s.mu.Lock()
	if s.leaseID != id || s.closed {
		s.mu.Unlock()
		return
	}
	s.leaseID, s.regDirty, s.retryAt = 0, true, time.Time{}
	all := Loss{Session: true, Reason: reason, Resources: make([]Resource, 0, len(s.owned))}
	for k, o := range s.owned {
		delete(s.owned, k)
		o.markLost()
		all.Resources = append(all.Resources, o.Resource)
	}
	s.losses.add(all)
	s.mu.Unlock()
	s.log.Warn("lease session expired", "lease", fmt.Sprintf("%x", id), "ownerships_lost", len(all.Resources), "reason", reason)
	ctx, cancel := context.WithTimeout(s.ctx, s.retryInterval())
	defer cancel()
	if _, err := s.kaCli.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("revoke expired lease", "lease", fmt.Sprintf("%x", id), "err", err)
	}
}

// renew grants a new lease and re-puts the registered keys under it.
func (s *Session) renew() {
	ctx, cancel := context.WithTimeout(s.ctx, s.retryInterval())
	err := s.grant(ctx)
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("grant new session lease", "err", err)
		}
		return
	}
	s.putRegistered()
}

func (s *Session) grant(ctx context.Context) error {
	send := s.cfg.Now()
	resp, err := s.kaCli.Grant(ctx, ttlSeconds(s.cfg.TTL))
	if err != nil {
		return fmt.Errorf("grant lease ttl %v: %w", s.cfg.TTL, err)
	}
	ttl := time.Duration(resp.TTL) * time.Second
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.leaseID, s.ttl, s.lastSend = resp.ID, ttl, send
	s.deadline = send.Add(ttl - s.cfg.SafetyMargin)
	s.regDirty = len(s.registered) > 0
	s.log.Info("lease session granted", "lease", fmt.Sprintf("%x", resp.ID), "ttl", ttl)
	return nil
}

func (s *Session) putRegistered() {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.RLock()
	id, keys := s.leaseID, maps.Clone(s.registered)
	s.mu.RUnlock()
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.retryInterval())
	defer cancel()
	for k, v := range keys {
		if _, err := s.cli.Put(ctx, k, v, clientv3.WithLease(id)); err != nil {
			s.log.Warn("re-put registered key", "key", k, "err", err)
			return
		}
	}
	s.mu.Lock()
	if s.leaseID == id { // Register holds regMu too, so keys is complete
		s.regDirty = false
	}
	s.mu.Unlock()
}
