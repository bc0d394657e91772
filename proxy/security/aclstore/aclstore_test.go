package aclstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

type replica struct {
	az    *authz.Authorizer
	store *Store
	bad   atomic.Int32
}

func startReplica(t *testing.T, ctx context.Context, endpoint string, l layout.Layout) *replica {
	t.Helper()
	r := &replica{az: authz.New(authz.Config{Mode: authz.DenyByDefault})}
	r.store = New(Config{Client: etcdtest.NewClient(t, endpoint), Layout: l, Authorizer: r.az, OnBadValue: func() { r.bad.Add(1) }})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.store.Run(ctx)
	}()
	t.Cleanup(func() { <-done })
	select {
	case <-r.store.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("store never synced")
	}
	return r
}

func (r *replica) allows(principal, topic string) bool {
	return r.az.Authorize(&authz.Query{Principal: principal, Host: "127.0.0.1", Operation: kmsg.ACLOperationWrite,
		Resource: kmsg.ACLResourceTypeTopic, Name: topic}).Allowed
}

func writeAlice() authz.Binding {
	return authz.Binding{
		Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypePrefixed, Name: "a-"},
		Entry:   authz.Entry{Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow},
	}
}

// A binding written through one replica is enforced by the other within a
// second, and so is its deletion.
func TestChangeReachesOtherReplica(t *testing.T) {
	srv, cli := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := layout.New("")
	r1 := startReplica(t, ctx, srv.Endpoint, l)
	r2 := startReplica(t, ctx, srv.Endpoint, l)
	t.Cleanup(cancel)

	if r2.allows("User:alice", "a-orders") {
		t.Fatal("allowed before any binding")
	}
	start := time.Now()
	rev, err := Create(ctx, cli, l, []authz.Binding{writeAlice(), writeAlice()})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if err := r2.store.WaitRevision(wctx, rev); err != nil {
		t.Fatalf("other replica: %v", err)
	}
	if !r2.allows("User:alice", "a-orders") || r2.allows("User:bob", "a-orders") {
		t.Fatal("other replica does not enforce the new binding")
	}
	t.Logf("created binding enforced by the other replica after %v", time.Since(start))

	got, err := List(ctx, cli, l, authz.Filter{Type: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})
	if err != nil || len(got) != 1 || got[0] != writeAlice() {
		t.Fatalf("List = %v, %v; want the one binding", got, err)
	}

	start = time.Now()
	name := "a-orders"
	deleted, rev, err := Delete(ctx, cli, l, []authz.Filter{{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeMatch,
		Name: &name, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 {
		t.Fatalf("Delete = %v, %v", deleted, err)
	}
	wctx2, wcancel2 := context.WithTimeout(ctx, time.Second)
	defer wcancel2()
	if err := r1.store.WaitRevision(wctx2, rev); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if r1.allows("User:alice", "a-orders") {
		t.Fatal("still allowed after the delete")
	}
	t.Logf("deletion enforced after %v", time.Since(start))
}

func TestBadValueSkipped(t *testing.T) {
	srv, cli := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := layout.New("")
	r := startReplica(t, ctx, srv.Endpoint, l)
	t.Cleanup(cancel)
	good := ToLayout(writeAlice())
	if _, err := cli.Put(ctx, l.ACLPrefix()+"junk", `{"resource_type":"TOPIC"}`); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Put(ctx, l.ACLKey(good), layout.Marshal(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.store.WaitRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if !r.allows("User:alice", "a-x") || r.bad.Load() != 1 {
		t.Fatalf("allowed %v, bad values %d; want the good binding kept and one bad value counted", r.allows("User:alice", "a-x"), r.bad.Load())
	}
	if _, err := Create(ctx, cli, l, []authz.Binding{{}}); err == nil {
		t.Fatal("Create accepted an invalid binding")
	}
}
