// Package etcdmirror keeps a local view of an etcd prefix current: it lists the
// prefix, then watches it from the listing's revision + 1, so no event
// between the two is lost. When the watch falls behind a compaction it
// re-lists and resumes; when etcd is unreachable it keeps the last view,
// reports the outage and reconnects with backoff.
//
// Its limit: it knows nothing of what the keys mean; a Handler does (the
// proxy's routing feeder, leasewatch, for the meta prefix; the stub broker
// for its meta and log prefixes). It depends only on etcd's client, and
// lives under internal/ rather than in leasewatch because both the proxy
// side and the stub broker use it: neither imports the other.
package etcdmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Handler receives the view. Sync calls it from one goroutine, never
// concurrently; calls must not block for long, or the watch falls behind.
type Handler interface {
	// Reset replaces the whole view with a full listing taken at rev
	// (initially and after each re-list). kvs is sorted by key.
	Reset(kvs []*mvccpb.KeyValue, rev int64)
	// Put applies a created or updated key.
	Put(kv *mvccpb.KeyValue)
	// Delete applies a deleted key; kv.Key and kv.ModRevision are set, the
	// value is empty.
	Delete(kv *mvccpb.KeyValue)
	// Synced says the view is complete up to rev. It follows Reset, every
	// applied watch response and every progress confirmation, so it keeps
	// arriving while nothing changes.
	Synced(rev int64)
}

// SyncConfig configures Sync. Client, Prefix and Handler are required.
type SyncConfig struct {
	Client *clientv3.Client
	Prefix string
	// End, if set, narrows the view to the key range [Prefix, End) (a
	// source that needs a few key families of a busy prefix watches only
	// the range they sit in); "" means every key starting with Prefix.
	End     string
	Handler Handler
	Logger  *slog.Logger // nil: discard
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts
	// (defaults 100ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	// OnResync, if set, is called each time Sync drops its watch and starts
	// over: reason is ReasonCompacted (re-list) or one of the other Reason
	// constants (resume from the last revision).
	OnResync func(reason string)
	// OnDisconnect, if set, is called when Sync finds etcd unreachable or its
	// watch broken. The next Synced call means it is back.
	OnDisconnect func(err error)
	// ProgressInterval is how often Sync asks etcd to confirm the watch is
	// current (default 1s). Three intervals without any answer count as a
	// stalled watch, which Sync replaces.
	ProgressInterval time.Duration
	// RequestTimeout bounds each listing request (default 5s).
	RequestTimeout time.Duration
	// PageSize is the number of keys per listing request (default 5000), so
	// a large prefix does not need one huge response.
	PageSize int64
}

// Reasons passed to OnResync.
const (
	ReasonCompacted   = "compacted"    // watch revision compacted: re-listed
	ReasonWatchClosed = "watch-closed" // watch channel closed without an error
	ReasonCanceled    = "canceled"     // etcd canceled the watch (e.g. no leader)
	ReasonStalled     = "stalled"      // no answer to progress requests
	ReasonListFailed  = "list-failed"  // listing failed; retrying
)

// stallTicks is how many progress intervals without any watch response make
// a watch count as stalled.
const stallTicks = 3

var errStalled = errors.New("watch stalled: no response to progress requests")

// Sync mirrors cfg.Prefix (or the range up to cfg.End) into cfg.Handler until ctx ends, then returns
// ctx.Err(). It returns early only for an invalid config.
func Sync(ctx context.Context, cfg SyncConfig) error {
	if cfg.Client == nil || cfg.Handler == nil || cfg.Prefix == "" {
		return errors.New("mirror: Sync needs Client, Prefix and Handler")
	}
	s := &syncer{cfg: withDefaults(cfg)}
	return s.run(ctx)
}

func withDefaults(cfg SyncConfig) SyncConfig {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.End == "" {
		cfg.End = clientv3.GetPrefixRangeEnd(cfg.Prefix)
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(5*time.Second, cfg.MinBackoff)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 5000
	}
	return cfg
}

type syncer struct {
	cfg     SyncConfig
	backoff time.Duration // next wait; reset once a watch delivers
}

func (s *syncer) run(ctx context.Context) error {
	var rev int64 // revision the view is complete up to; 0 = needs a listing
	for ctx.Err() == nil {
		if rev == 0 {
			kvs, r, err := s.list(ctx)
			if err != nil {
				s.failed(ctx, ReasonListFailed, fmt.Errorf("list %s: %w", s.cfg.Prefix, err))
				continue
			}
			s.cfg.Handler.Reset(kvs, r)
			s.cfg.Handler.Synced(r)
			rev = r
		}
		next, reason, err := s.watch(ctx, rev)
		if ctx.Err() != nil {
			break
		}
		s.failed(ctx, reason, fmt.Errorf("watch %s at revision %d: %w", s.cfg.Prefix, max(next, rev), err))
		rev = next
	}
	return ctx.Err()
}

// failed reports a lost watch or listing and waits before the next attempt.
func (s *syncer) failed(ctx context.Context, reason string, err error) {
	if ctx.Err() != nil {
		return
	}
	s.cfg.Logger.Warn("etcd sync interrupted", "prefix", s.cfg.Prefix, "reason", reason, "err", err)
	if s.cfg.OnResync != nil {
		s.cfg.OnResync(reason)
	}
	if reason != ReasonCompacted && s.cfg.OnDisconnect != nil {
		s.cfg.OnDisconnect(err)
	}
	if reason == ReasonCompacted {
		return // etcd answered; re-list at once
	}
	d := s.nextBackoff()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s *syncer) nextBackoff() time.Duration {
	if s.backoff < s.cfg.MinBackoff {
		s.backoff = s.cfg.MinBackoff
	}
	d := s.backoff
	s.backoff = min(2*s.backoff, s.cfg.MaxBackoff)
	// ±20% jitter so that many proxies do not reconnect in lockstep.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// list reads the whole prefix at one revision, page by page.
func (s *syncer) list(ctx context.Context) ([]*mvccpb.KeyValue, int64, error) {
	end := s.cfg.End
	key, rev := s.cfg.Prefix, int64(0)
	var kvs []*mvccpb.KeyValue
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(s.cfg.PageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cfg.Client.Get(rctx, key, opts...)
		cancel()
		if errors.Is(err, rpctypes.ErrCompacted) {
			// Compacted between two pages: start over at a newer revision.
			key, rev, kvs = s.cfg.Prefix, 0, kvs[:0]
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs = append(kvs, resp.Kvs...)
		if !resp.More || len(resp.Kvs) == 0 {
			return kvs, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch applies events after rev until the watch breaks. It returns the
// revision the view is complete up to (0 when a re-list is needed), and why
// it stopped.
func (s *syncer) watch(ctx context.Context, rev int64) (int64, string, error) {
	w := clientv3.NewWatcher(s.cfg.Client)
	defer w.Close()
	// WithRequireLeader: a member cut off from its cluster cancels the watch
	// instead of silently serving nothing.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	// Watch itself blocks until etcd confirms the watch, indefinitely while
	// etcd is unreachable, so it runs aside and the stall timer covers it.
	chc := make(chan clientv3.WatchChan, 1)
	go func() {
		chc <- w.Watch(wctx, s.cfg.Prefix, clientv3.WithRange(s.cfg.End), clientv3.WithRev(rev+1),
			clientv3.WithProgressNotify())
	}()
	var wch clientv3.WatchChan // nil (never ready) until Watch returns
	defer func() {
		cancel()
		if wch == nil {
			<-chc // Watch returns once wctx is canceled
		}
	}()
	tick := time.NewTicker(s.cfg.ProgressInterval)
	defer tick.Stop()
	silent := 0
	for {
		select {
		case <-ctx.Done():
			return rev, "", ctx.Err()
		case wch = <-chc:
		case resp, ok := <-wch:
			if !ok {
				return rev, ReasonWatchClosed, errors.New("watch channel closed")
			}
			if resp.CompactRevision != 0 {
				return 0, ReasonCompacted, fmt.Errorf("compacted at %d: %w", resp.CompactRevision, rpctypes.ErrCompacted)
			}
			if err := resp.Err(); err != nil {
				return rev, ReasonCanceled, err
			}
			rev = s.apply(&resp, rev)
			silent = 0
			s.backoff = 0
		case <-tick.C:
			if wch != nil && s.current(wctx, rev) {
				// Nothing was written since rev: the view is complete now.
				silent = 0
				s.cfg.Handler.Synced(rev)
				continue
			}
			if silent++; silent >= stallTicks {
				return rev, ReasonStalled, errStalled
			}
			if wch != nil {
				s.requestProgress(wctx, w)
			}
		}
	}
}

// apply hands one watch response to the handler and returns the new revision.
func (s *syncer) apply(resp *clientv3.WatchResponse, rev int64) int64 {
	h := s.cfg.Handler
	for _, ev := range resp.Events {
		switch ev.Type {
		case clientv3.EventTypePut:
			h.Put(ev.Kv)
		case clientv3.EventTypeDelete:
			h.Delete(ev.Kv)
		}
	}
	rev = max(rev, resp.Header.GetRevision())
	h.Synced(rev)
	return rev
}

// current reports whether etcd's revision is still rev, with one linearizable
// read of a single key. Progress requests cannot confirm that: etcd answers
// them only once its revision reaches the watch's start revision (rev+1), so
// on an idle cluster they go unanswered and a healthy watch would look stalled.
func (s *syncer) current(ctx context.Context, rev int64) bool {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ProgressInterval)
	defer cancel()
	resp, err := s.cfg.Client.Get(rctx, s.cfg.Prefix, clientv3.WithCountOnly())
	return err == nil && resp.Header.GetRevision() <= rev
}

// requestProgress asks etcd to confirm the watch's revision; the answer comes
// on the watch channel. It must use the watch's context: the client picks the
// gRPC stream by the context's metadata.
func (s *syncer) requestProgress(wctx context.Context, w clientv3.Watcher) {
	rctx, cancel := context.WithTimeout(wctx, s.cfg.ProgressInterval)
	defer cancel()
	if err := w.RequestProgress(rctx); err != nil && wctx.Err() == nil {
		s.cfg.Logger.Debug("etcd progress request failed", "prefix", s.cfg.Prefix, "err", err)
	}
}
