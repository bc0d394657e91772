package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
)

// StoreConfig configures a Store. Client, Manager and ID are required.
type StoreConfig struct {
	Client  *clientv3.Client
	Layout  layout.Layout
	Manager *Manager
	// ID names this replica's registration (unique per running replica).
	ID string
	// LeaseTTL is the registration's lease [10s]: a replica that dies
	// stops counting that long after.
	LeaseTTL time.Duration
	Logger   *slog.Logger
}

// Store keeps a Manager's table and replica count current from etcd and
// writes quota changes there.
type Store struct {
	cfg StoreConfig
	log *slog.Logger
	// View's Synced is closed once the table holds a complete listing; its
	// WaitRevision waits until the table holds a revision (Alter uses it).
	*etcdmirror.View
	v view // owned by the Sync goroutine
}

// NewStore checks cfg.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Client == nil || cfg.Manager == nil || cfg.ID == "" || strings.Contains(cfg.ID, "/") {
		return nil, errors.New("quota: StoreConfig needs Client, Manager and an ID without '/'")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, log: cfg.Logger, View: etcdmirror.NewView()}
	s.v = view{s: s, entities: map[string]entry{}, replicas: map[string]bool{}}
	return s, nil
}

// Table is the table in force.
func (s *Store) Table() *Table { return s.cfg.Manager.Table() }

// Run registers this replica, mirrors the quota prefix and evicts idle
// rates until ctx ends; then it withdraws the registration and returns nil.
func (s *Store) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.register(ctx) })
	wg.Go(func() { s.evictLoop(ctx) })
	err := etcdmirror.Sync(ctx, etcdmirror.SyncConfig{
		Client: s.cfg.Client, Prefix: s.cfg.Layout.QuotaPrefix(), Handler: &s.v, Logger: s.log,
	})
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Store) evictLoop(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.cfg.Manager.Evict()
		}
	}
}

// register keeps this replica's key alive under a lease, re-creating it
// when the lease is lost, until ctx ends; it then revokes the lease.
func (s *Store) register(ctx context.Context) {
	for ctx.Err() == nil {
		if err := s.holdRegistration(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("quota replica registration lost", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) holdRegistration(ctx context.Context) error {
	cli := s.cfg.Client
	lease, err := cli.Grant(ctx, int64(s.cfg.LeaseTTL/time.Second))
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = cli.Revoke(rctx, lease.ID)
	}()
	if _, err := cli.Put(ctx, s.cfg.Layout.QuotaReplicaKey(s.cfg.ID), "", clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	ka, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("keep alive: %w", err)
	}
	for range ka { // closed when ctx ends or the lease is lost
	}
	return errors.New("keep-alive ended")
}

// entry is one entity's quotas as stored.
type entry struct {
	e Entity
	l Limits
}

// view is the mirrored prefix; every change rebuilds the table (quota
// configurations are small) and the replica count.
type view struct {
	s        *Store
	entities map[string]entry
	replicas map[string]bool
}

func (v *view) Reset(kvs []*mvccpb.KeyValue, _ int64) {
	clear(v.entities)
	clear(v.replicas)
	for _, kv := range kvs {
		v.put(kv)
	}
	v.publish()
}

func (v *view) Put(kv *mvccpb.KeyValue) { v.put(kv); v.publish() }

func (v *view) Delete(kv *mvccpb.KeyValue) {
	k := string(kv.Key)
	delete(v.entities, k)
	delete(v.replicas, k)
	v.publish()
}

func (v *view) Synced(rev int64) { v.s.View.Advance(rev) }

func (v *view) put(kv *mvccpb.KeyValue) {
	l := v.s.cfg.Layout
	k := string(kv.Key)
	if strings.HasPrefix(k, l.QuotaReplicaPrefix()) {
		v.replicas[k] = true
		return
	}
	le, ok := l.ParseQuotaEntityKey(k)
	if !ok {
		v.s.log.Warn("ignoring unknown quota key", "key", k)
		return
	}
	var vals layout.QuotaValues
	if err := json.Unmarshal(kv.Value, &vals); err != nil {
		v.s.log.Warn("ignoring undecodable quota", "key", k, "err", err)
		return
	}
	ent := entry{e: FromLayout(le)}
	for name, val := range vals {
		if typ, ok := ParseType(name); ok {
			ent.l.Value[typ], ent.l.Has[typ] = val, true
		}
	}
	v.entities[k] = ent
}

func (v *view) publish() {
	entries := make(map[Entity]Limits, len(v.entities))
	for _, ent := range v.entities {
		entries[ent.e] = ent.l
	}
	v.s.cfg.Manager.SetTable(NewTable(entries))
	v.s.cfg.Manager.SetReplicas(len(v.replicas))
}

// Op changes one quota of an entity: set it to Value, or remove it.
type Op struct {
	Type   Type
	Value  float64
	Remove bool
}

// Alter applies ops to e's quotas in etcd, atomically against concurrent
// changes to the same entity, and returns once this replica's table holds
// the change, so that what it describes and enforces next includes it.
func (s *Store) Alter(ctx context.Context, e Entity, ops []Op) error {
	key := s.cfg.Layout.QuotaEntityKey(e.Layout())
	for range 10 { // bounded: only lost races repeat
		resp, err := s.cfg.Client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		vals := layout.QuotaValues{}
		var rev int64
		if len(resp.Kvs) > 0 {
			rev = resp.Kvs[0].ModRevision
			if err := json.Unmarshal(resp.Kvs[0].Value, &vals); err != nil {
				return fmt.Errorf("decode %s: %w", key, err)
			}
		}
		for _, op := range ops {
			if op.Remove {
				delete(vals, op.Type.String())
			} else {
				vals[op.Type.String()] = op.Value
			}
		}
		write := clientv3.OpDelete(key)
		if len(vals) > 0 {
			b, err := json.Marshal(vals)
			if err != nil {
				return fmt.Errorf("encode %s: %w", key, err)
			}
			write = clientv3.OpPut(key, string(b))
		}
		tr, err := s.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(write).Commit()
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if tr.Succeeded {
			if err := s.WaitRevision(ctx, tr.Header.Revision); err != nil {
				return fmt.Errorf("wrote %s, not yet in force here: %w", key, err)
			}
			return nil
		}
	}
	return fmt.Errorf("write %s: too many concurrent changes", key)
}
