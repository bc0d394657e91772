// Package credstore keeps SCRAM credentials in etcd under the layout's
// prefix, so that every proxy replica authenticates against the same
// users: a Store is one replica's view, kept current by a watch (a change
// made through any replica or the CLI is seen by all within the watch's
// latency). Put, Delete and List change and read etcd directly.
//
// Only stored keys are kept (salt, iterations, StoredKey, ServerKey);
// passwords are turned into them here and never stored.
package credstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/xdg-go/scram"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/sasl"
)

// Iteration bounds, as Kafka enforces them. The default (and the salt
// length) is what the SASL stand-in credentials of unknown users copy.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = sasl.DefaultIterations
)

// Mechanisms are the SCRAM mechanisms a credential can be for.
var Mechanisms = []string{sasl.ScramSHA256, sasl.ScramSHA512}

type credKey struct{ user, mech string }

// Store is a replica's view of the credentials.
type Store struct {
	cli    *clientv3.Client
	layout layout.Layout
	log    *slog.Logger

	// View's Synced is closed once the view holds a complete listing; its
	// WaitRevision waits until the view includes a revision (a change this
	// replica just made).
	*etcdmirror.View

	mu    sync.RWMutex
	creds map[credKey]scram.StoredCredentials
}

// New returns an empty view; Run fills it.
func New(cli *clientv3.Client, l layout.Layout, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{cli: cli, layout: l, log: log, creds: map[credKey]scram.StoredCredentials{}, View: etcdmirror.NewView()}
}

// Run keeps the view current until ctx ends.
func (s *Store) Run(ctx context.Context) error {
	err := etcdmirror.Sync(ctx, etcdmirror.SyncConfig{
		Client: s.cli, Prefix: s.layout.SCRAMPrefix(), Handler: (*handler)(s), Logger: s.log,
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// SCRAM returns user's credential for a mechanism (sasl.Credentials).
func (s *Store) SCRAM(mech, user string) (scram.StoredCredentials, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.creds[credKey{user, mech}]
	return c, ok
}

// Users lists every user's mechanisms and iteration counts, sorted by
// user.
func (s *Store) Users() []User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	by := map[string]*User{}
	for k, c := range s.creds {
		u := by[k.user]
		if u == nil {
			u = &User{Name: k.user}
			by[k.user] = u
		}
		u.Credentials = append(u.Credentials, Info{Mechanism: k.mech, Iterations: c.Iters})
	}
	return sortUsers(by)
}

// User is one user's credentials, without their keys.
type User struct {
	Name        string
	Credentials []Info
}

// Info describes one credential.
type Info struct {
	Mechanism  string
	Iterations int
}

func sortUsers(by map[string]*User) []User {
	out := make([]User, 0, len(by))
	for _, u := range by {
		sort.Slice(u.Credentials, func(i, j int) bool { return u.Credentials[i].Mechanism < u.Credentials[j].Mechanism })
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// handler applies the watch to the view.
type handler Store

func (h *handler) decode(kv *mvccpb.KeyValue) (credKey, scram.StoredCredentials, bool) {
	user, mech, ok := h.layout.ParseSCRAMKey(string(kv.Key))
	if !ok {
		return credKey{}, scram.StoredCredentials{}, false
	}
	var c layout.SCRAMCredential
	if err := json.Unmarshal(kv.Value, &c); err != nil || c.Iterations <= 0 || len(c.StoredKey) == 0 {
		h.log.Warn("ignoring malformed SCRAM credential in etcd", "key", string(kv.Key))
		return credKey{}, scram.StoredCredentials{}, false
	}
	return credKey{user, mech}, scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations},
		StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
	}, true
}

func (h *handler) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	m := make(map[credKey]scram.StoredCredentials, len(kvs))
	for _, kv := range kvs {
		if k, c, ok := h.decode(kv); ok {
			m[k] = c
		}
	}
	h.mu.Lock()
	h.creds = m
	h.mu.Unlock()
}

func (h *handler) Put(kv *mvccpb.KeyValue) {
	k, c, ok := h.decode(kv)
	if !ok {
		return
	}
	h.mu.Lock()
	h.creds[k] = c
	h.mu.Unlock()
}

func (h *handler) Delete(kv *mvccpb.KeyValue) {
	user, mech, ok := h.layout.ParseSCRAMKey(string(kv.Key))
	if !ok {
		return
	}
	h.mu.Lock()
	delete(h.creds, credKey{user, mech})
	h.mu.Unlock()
}

func (h *handler) Synced(rev int64) { h.View.Advance(rev) }

// NewCredential derives a credential from a password with a fresh random
// salt.
func NewCredential(mech, password string, iterations int) (layout.SCRAMCredential, error) {
	salt := make([]byte, sasl.DefaultSaltLen)
	rand.Read(salt) // never fails (Go 1.24+)
	c, err := sasl.FromPassword(mech, password, salt, iterations)
	if err != nil {
		return layout.SCRAMCredential{}, err
	}
	return toLayout(c), nil
}

// FromSaltedPassword is the credential AlterUserScramCredentials upserts.
func FromSaltedPassword(mech string, salt []byte, iterations int, salted []byte) (layout.SCRAMCredential, error) {
	c, err := sasl.FromSaltedPassword(mech, salt, iterations, salted)
	if err != nil {
		return layout.SCRAMCredential{}, err
	}
	return toLayout(c), nil
}

func toLayout(c scram.StoredCredentials) layout.SCRAMCredential {
	return layout.SCRAMCredential{Salt: []byte(c.Salt), Iterations: c.Iters, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

// CheckIterations says whether Kafka would accept an iteration count.
func CheckIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return fmt.Errorf("iterations %d outside [%d, %d]", n, MinIterations, MaxIterations)
	}
	return nil
}
