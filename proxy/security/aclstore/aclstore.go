// Package aclstore keeps ACL bindings in etcd (layout.ACLPrefix, one key
// per binding) and a replica's authorizer current with them: Store.Run
// mirrors the prefix (list, then watch; re-list after compaction) and
// hands the authorizer the whole set at each revision, so a change made
// through any replica or the CLI is enforced by all within the watch's
// latency. Create, List and Delete read and change etcd directly, so they
// see every replica's writes.
//
// Its limit: it stores and watches; deciding belongs to package authz,
// Kafka's request forms to package apis.
package aclstore

import (
	"context"
	"log/slog"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// Store is one replica's view of the bindings, feeding an authorizer.
type Store struct {
	cli    *clientv3.Client
	layout layout.Layout
	az     *authz.Authorizer
	log    *slog.Logger
	onBad  func() // a value that breaks the contract was skipped

	// View's Synced is closed once the authorizer holds a complete listing;
	// its WaitRevision waits until the authorizer holds every binding
	// written up to a revision, so that a replica enforces its own writes
	// before it answers them.
	*etcdmirror.View

	mu    sync.Mutex
	view  map[string]authz.Binding // by key
	dirty bool
}

// Config configures a Store; Client and Authorizer are required.
type Config struct {
	Client     *clientv3.Client
	Layout     layout.Layout
	Authorizer *authz.Authorizer
	Logger     *slog.Logger
	OnBadValue func() // optional: counts skipped values
}

// New returns a store with an empty view; Run fills it.
func New(cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnBadValue == nil {
		cfg.OnBadValue = func() {}
	}
	return &Store{
		cli: cfg.Client, layout: cfg.Layout, az: cfg.Authorizer, log: cfg.Logger, onBad: cfg.OnBadValue,
		View: etcdmirror.NewView(), view: map[string]authz.Binding{},
	}
}

// Run keeps the view and the authorizer current until ctx ends.
func (s *Store) Run(ctx context.Context) error {
	err := etcdmirror.Sync(ctx, etcdmirror.SyncConfig{
		Client: s.cli, Prefix: s.layout.ACLPrefix(), Handler: (*handler)(s), Logger: s.log,
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// handler applies mirror events; it updates the authorizer once per
// revision, not once per key, so a transaction takes effect whole.
type handler Store

func (h *handler) Reset(kvs []*mvccpb.KeyValue, _ int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.view)
	for _, kv := range kvs {
		h.put(kv)
	}
	h.dirty = true
}

func (h *handler) Put(kv *mvccpb.KeyValue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.view, string(kv.Key)) // a bad new value removes the old one
	h.put(kv)
	h.dirty = true
}

func (h *handler) put(kv *mvccpb.KeyValue) {
	a, err := h.layout.DecodeACL(string(kv.Key), kv.Value)
	if err == nil {
		b := FromLayout(a)
		if err = b.Validate(); err == nil {
			h.view[string(kv.Key)] = b
			return
		}
	}
	h.onBad()
	h.log.Warn("skipping bad ACL binding", "key", string(kv.Key), "err", err)
}

func (h *handler) Delete(kv *mvccpb.KeyValue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.view, string(kv.Key))
	h.dirty = true
}

func (h *handler) Synced(rev int64) {
	h.mu.Lock()
	if h.dirty {
		bs := make([]authz.Binding, 0, len(h.view))
		for _, b := range h.view {
			bs = append(bs, b)
		}
		h.az.Update(bs)
		h.dirty = false
	}
	h.mu.Unlock()
	h.View.Advance(rev)
}

// ToLayout is b in the etcd contract's form.
func ToLayout(b authz.Binding) layout.ACL {
	return layout.ACL{
		ResourceType: b.Type, PatternType: b.PatternType, Name: b.Name,
		Principal: b.Principal, Host: b.Host, Operation: b.Operation, Permission: b.Permission,
	}
}

// FromLayout is the binding an etcd value holds.
func FromLayout(a layout.ACL) authz.Binding {
	return authz.Binding{
		Pattern: authz.Pattern{Type: a.ResourceType, PatternType: a.PatternType, Name: a.Name},
		Entry:   authz.Entry{Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.Permission},
	}
}
