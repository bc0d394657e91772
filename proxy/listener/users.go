package listener

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// Users serves the SCRAM credential APIs (apis.SCRAMAdmin) from the etcd
// store: changes go to etcd, answers come from this replica's view, and a
// change returns once this replica's view has it. sec.SuperUsers say who
// may use them; changes go to sec.Audit.
type Users struct {
	store  *credstore.Store
	cli    *clientv3.Client
	layout layout.Layout
	sec    *Security
	audit  *audit.Log
}

// NewUsers serves the SCRAM credential APIs from store, writing through cli
// under lay.
func NewUsers(store *credstore.Store, cli *clientv3.Client, lay layout.Layout, sec *Security) *Users {
	return &Users{store: store, cli: cli, layout: lay, sec: sec, audit: sec.Audit}
}

// viewWait bounds waiting for this replica's view to show a change.
const viewWait = 5 * time.Second

func (a *Users) principal(ctx context.Context) principal.Principal {
	if c := apis.ConnInfoFrom(ctx); c != nil {
		return c.Principal()
	}
	return principal.Anonymous
}

func (a *Users) Allowed(ctx context.Context) bool {
	return a.sec.mayManageUsers(a.principal(ctx))
}

func (a *Users) Users() []credstore.User { return a.store.Users() }

func (a *Users) Upsert(ctx context.Context, user, mech string, iterations int, salt, salted []byte) error {
	c, err := credstore.FromSaltedPassword(mech, salt, iterations, salted)
	if err != nil {
		return err
	}
	rev, err := credstore.Put(ctx, a.cli, a.layout, user, mech, c)
	if err != nil {
		return err
	}
	a.changed(ctx, audit.CredentialChanged, user, mech)
	return a.wait(ctx, rev)
}

func (a *Users) Delete(ctx context.Context, user, mech string) (bool, error) {
	existed, rev, err := credstore.Delete(ctx, a.cli, a.layout, user, mech)
	if err != nil || !existed {
		return existed, err
	}
	a.changed(ctx, audit.CredentialDeleted, user, mech)
	return true, a.wait(ctx, rev)
}

func (a *Users) wait(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, viewWait)
	defer cancel()
	return a.store.WaitRevision(ctx, rev)
}

func (a *Users) changed(ctx context.Context, kind, user, mech string) {
	e := audit.Event{Event: kind, User: user, Mechanism: mech, Principal: a.principal(ctx).String()}
	if c := apis.ConnInfoFrom(ctx); c != nil {
		e.Listener = c.Listener
	}
	a.audit.Write(e)
}
