package harness

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// TestACLBindingSet checks the ACL scenarios' bindings: the count asked for,
// each valid and stored under its own key, and that they let the bench
// workload (a plaintext client on an acl-bench- topic) do what it does
// while the unrelated ones grant it nothing more.
func TestACLBindingSet(t *testing.T) {
	bs := aclBindingSet(aclBindings)
	if len(bs) != aclBindings {
		t.Fatalf("got %d bindings, want %d", len(bs), aclBindings)
	}
	l := layout.New("")
	keys := make(map[string]bool, len(bs))
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		keys[l.ACLKey(aclstore.ToLayout(b))] = true
	}
	if len(keys) != aclBindings {
		t.Fatalf("%d distinct keys for %d bindings: duplicates would shrink the set in etcd", len(keys), aclBindings)
	}
	az := authz.New(authz.Config{Mode: authz.DenyByDefault})
	az.Update(bs)
	topic, cluster := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	for _, c := range []struct {
		rt    kmsg.ACLResourceType
		name  string
		op    kmsg.ACLOperation
		allow bool
	}{
		{topic, roundTopic(aclTopicPrefix+"1k", 0), kmsg.ACLOperationWrite, true},
		{topic, roundTopic(aclTopicPrefix+"fetch", 1), kmsg.ACLOperationRead, true},
		{topic, roundTopic(aclTopicPrefix+"fetch", 1), kmsg.ACLOperationDescribe, true},
		{cluster, authz.ClusterName, kmsg.ACLOperationIdempotentWrite, true},
		{cluster, authz.ClusterName, kmsg.ACLOperationDescribe, true},
		{topic, "team-0.events", kmsg.ACLOperationRead, false},
		{topic, "audit-4", kmsg.ACLOperationWrite, false},
		{cluster, authz.ClusterName, kmsg.ACLOperationAlter, false},
	} {
		d := az.Authorize(&authz.Query{Principal: authz.AnonymousUser, Host: "127.0.0.1",
			Resource: c.rt, Name: c.name, Operation: c.op})
		if d.Allowed != c.allow {
			t.Errorf("%s %s %s: allowed %t (%s), want %t", c.rt, c.name, c.op, d.Allowed, d.Reason, c.allow)
		}
	}
}
