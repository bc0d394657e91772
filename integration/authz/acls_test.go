package authz

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

func describe(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) kadm.DescribedACLs {
	t.Helper()
	res, err := adm.DescribeACLs(testCtx(t), b)
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	var out kadm.DescribedACLs
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("DescribeACLs filter: %v", r.Err)
		}
		out = append(out, r.Described...)
	}
	return out
}

// anyACL selects every binding.
func anyACL() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().ResourcePatternType(kadm.ACLPatternAny).Operations()
}

// kadm manages bindings through the proxy: create, describe with each
// filter form, delete; a binding made through one proxy is described by
// the other.
func TestACLAdminWithKadm(t *testing.T) {
	c := startCluster(t, 2, authz.Config{Mode: authz.DenyByDefault, SuperUsers: []string{authz.AnonymousUser}})
	adm := newAdmin(t, c.ProxyAddrs()[0])
	other := newAdmin(t, c.ProxyAddrs()[1])
	ctx := testCtx(t)

	alice := kadm.NewACLs().Allow("User:alice").Topics("a-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpRead)
	secret := kadm.NewACLs().Deny("User:alice").Topics("a-secret").Operations(kadm.OpAll)
	bob := kadm.NewACLs().Allow("User:bob").Topics("a-orders").Groups("g-bob").Operations(kadm.OpRead)
	for _, b := range []*kadm.ACLBuilder{alice, secret, bob} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("CreateACLs: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs %s %s: %v", r.Principal, r.Name, r.Err)
			}
		}
	}

	all := anyACL()
	if got := describe(t, other, all); len(got) != 5 {
		t.Fatalf("the other proxy describes %d bindings, want 5: %+v", len(got), got)
	}
	// MATCH: the bindings that apply to topic a-secret: alice's prefix and
	// her deny.
	match := kadm.NewACLs().Topics("a-secret").Allow().AllowHosts().Deny().DenyHosts().ResourcePatternType(kadm.ACLPatternMatch).Operations()
	if got := describe(t, adm, match); len(got) != 3 { // prefix: write, read; literal deny
		t.Fatalf("MATCH a-secret describes %d bindings, want 3: %+v", len(got), got)
	}
	byPrincipal := kadm.NewACLs().AnyResource().Allow("User:bob").AllowHosts().ResourcePatternType(kadm.ACLPatternAny).Operations()
	if got := describe(t, adm, byPrincipal); len(got) != 2 {
		t.Fatalf("bob's bindings: %d, want 2: %+v", len(got), got)
	}
	prefixedOnly := anyACL().ResourcePatternType(kadm.ACLPatternPrefixed)
	if got := describe(t, adm, prefixedOnly); len(got) != 2 {
		t.Fatalf("prefixed bindings: %d, want 2", len(got))
	}

	del, err := other.DeleteACLs(ctx, kadm.NewACLs().Deny("User:alice").DenyHosts().Topics("a-secret").Operations().ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatalf("DeleteACLs: %v", err)
	}
	n := 0
	for _, r := range del {
		if r.Err != nil {
			t.Fatalf("DeleteACLs: %v", r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 1 {
		t.Fatalf("deleted %d bindings, want 1", n)
	}
	if got := describe(t, adm, all); len(got) != 4 {
		t.Fatalf("after delete: %d bindings, want 4", len(got))
	}
}

// Without Alter on the cluster, CreateAcls and DeleteAcls fail with
// CLUSTER_AUTHORIZATION_FAILED and DescribeAcls too without Describe; a
// binding granting them (written to etcd as kproxy acls does) lets them
// through.
func TestACLAdminNeedsClusterPermission(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault})
	adm := newAdmin(t, c.ProxyAddrs()[0])
	ctx := testCtx(t)
	b := kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs without permission = %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", res, err)
	}
	dres, err := adm.DescribeACLs(ctx, anyACL())
	if err != nil || len(dres) == 0 || !errors.Is(dres[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DescribeACLs without permission = %+v, %v; want CLUSTER_AUTHORIZATION_FAILED", dres, err)
	}

	grant := []authz.Binding{{
		Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeCluster, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: authz.ClusterName},
		Entry:   authz.Entry{Principal: authz.AnonymousUser, Host: "*", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow},
	}}
	if _, err := aclstore.Create(ctx, c.Client(), layout.New(""), grant); err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "CreateAcls allowed after the grant", func() error {
		res, err := adm.CreateACLs(ctx, b)
		if err == nil && len(res) == 1 {
			err = res[0].Err
		}
		return err
	})
	// Alter implies Describe.
	if got := describe(t, adm, anyACL()); len(got) != 2 {
		t.Fatalf("described %d bindings, want 2", len(got))
	}
}
