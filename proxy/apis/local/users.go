// Users: the SCRAM credential admin behind DescribeUserScramCredentials and
// AlterUserScramCredentials (scram.go answers them), writing to etcd.

package local

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// Users serves the SCRAM credential APIs (SCRAMAdmin) from the etcd
// store: changes go to etcd, answers come from this replica's view, and a
// change returns once this replica's view has it.
type Users struct {
	cfg UsersConfig
}

// UsersConfig is what Users needs; every field but Audit is required.
type UsersConfig struct {
	Store  *credstore.Store
	Etcd   *clientv3.Client // changes are written through it
	Layout layout.Layout
	// MayManage says who may describe and alter credentials (the
	// listeners' super users).
	MayManage func(principal.Principal) bool
	// Conn says who the client of ctx is and on which listener; false when
	// ctx names no client connection. The dispatcher's ConnIdentity.
	Conn  func(ctx context.Context) (p principal.Principal, listener string, ok bool)
	Audit *audit.Log // receives credential changes (nil: none)
}

// NewUsers serves the SCRAM credential APIs as cfg says.
func NewUsers(cfg UsersConfig) *Users { return &Users{cfg: cfg} }

// viewWait bounds waiting for this replica's view to show a change.
const viewWait = 5 * time.Second

func (a *Users) principal(ctx context.Context) principal.Principal {
	if p, _, ok := a.cfg.Conn(ctx); ok {
		return p
	}
	return principal.Anonymous
}

func (a *Users) Allowed(ctx context.Context) bool {
	return a.cfg.MayManage(a.principal(ctx))
}

func (a *Users) Users() []credstore.User { return a.cfg.Store.Users() }

func (a *Users) Upsert(ctx context.Context, user, mech string, iterations int, salt, salted []byte) error {
	c, err := credstore.FromSaltedPassword(mech, salt, iterations, salted)
	if err != nil {
		return err
	}
	rev, err := credstore.Put(ctx, a.cfg.Etcd, a.cfg.Layout, user, mech, c)
	if err != nil {
		return err
	}
	a.changed(ctx, audit.CredentialChanged, user, mech)
	return a.wait(ctx, rev)
}

func (a *Users) Delete(ctx context.Context, user, mech string) (bool, error) {
	existed, rev, err := credstore.Delete(ctx, a.cfg.Etcd, a.cfg.Layout, user, mech)
	if err != nil || !existed {
		return existed, err
	}
	a.changed(ctx, audit.CredentialDeleted, user, mech)
	return true, a.wait(ctx, rev)
}

func (a *Users) wait(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, viewWait)
	defer cancel()
	return a.cfg.Store.WaitRevision(ctx, rev)
}

func (a *Users) changed(ctx context.Context, kind, user, mech string) {
	e := audit.Event{Event: kind, User: user, Mechanism: mech, Principal: a.principal(ctx).String()}
	if _, l, ok := a.cfg.Conn(ctx); ok {
		e.Listener = l
	}
	a.cfg.Audit.Write(e)
}
