package authz

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topicT   = kmsg.ACLResourceTypeTopic
	groupT   = kmsg.ACLResourceTypeGroup
	clusterT = kmsg.ACLResourceTypeCluster
	txnT     = kmsg.ACLResourceTypeTransactionalId
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	opRead   = kmsg.ACLOperationRead
	opWrite  = kmsg.ACLOperationWrite
	opDesc   = kmsg.ACLOperationDescribe
)

func bind(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{Pattern{rt, pt, name}, Entry{principal, host, op, perm}}
}

// The cases follow Kafka's authorization documentation (docs/security.html,
// "Authorization and ACLs" and its kafka-acls examples).
func TestDecideKafkaDocumentedCases(t *testing.T) {
	// "Principals User:Bob and User:Alice are allowed to perform Operation
	// Read and Write on Topic Test-Topic from IP 198.51.100.0 and IP
	// 198.51.100.1."
	bobAlice := []Binding{}
	for _, p := range []string{"User:Bob", "User:Alice"} {
		for _, h := range []string{"198.51.100.0", "198.51.100.1"} {
			for _, op := range []kmsg.ACLOperation{opRead, opWrite} {
				bobAlice = append(bobAlice, bind(topicT, literal, "Test-Topic", p, h, op, allow))
			}
		}
	}
	// "allow all users to Read from Test-topic but only deny User:BadBob
	// from IP 198.51.100.3".
	badBob := []Binding{
		bind(topicT, literal, "Test-topic", "User:*", "*", opRead, allow),
		bind(topicT, literal, "Test-topic", "User:BadBob", "198.51.100.3", opRead, deny),
	}
	// "User:Jane to produce to any Topic whose name starts with Test-"
	// (--producer: Write, Describe and Create; prefixed pattern).
	jane := []Binding{
		bind(topicT, prefixed, "Test-", "User:Jane", "*", opWrite, allow),
		bind(topicT, prefixed, "Test-", "User:Jane", "*", opDesc, allow),
		bind(topicT, prefixed, "Test-", "User:Jane", "*", kmsg.ACLOperationCreate, allow),
	}
	// --topic '*': every topic.
	wildcard := []Binding{bind(topicT, literal, "*", "User:Peter", "*", opRead, allow)}
	// A consumer: Read on the topic and Read on its group.
	consumer := []Binding{
		bind(topicT, literal, "orders", "User:Carol", "*", opRead, allow),
		bind(groupT, literal, "billing", "User:Carol", "*", opRead, allow),
	}
	implied := []Binding{
		bind(topicT, literal, "t-write", "User:Ann", "*", opWrite, allow),
		bind(topicT, literal, "t-delete", "User:Ann", "*", kmsg.ACLOperationDelete, allow),
		bind(topicT, literal, "t-alter", "User:Ann", "*", kmsg.ACLOperationAlter, allow),
		bind(topicT, literal, "t-create", "User:Ann", "*", kmsg.ACLOperationCreate, allow),
		bind(topicT, literal, "t-alterconf", "User:Ann", "*", kmsg.ACLOperationAlterConfigs, allow),
		bind(topicT, literal, "t-all", "User:Ann", "*", kmsg.ACLOperationAll, allow),
		bind(topicT, literal, "t-denyall", "User:Ann", "*", opRead, allow),
		bind(topicT, literal, "t-denyall", "User:Ann", "*", kmsg.ACLOperationAll, deny),
		bind(topicT, literal, "t-denyread", "User:Ann", "*", kmsg.ACLOperationAll, allow),
		bind(topicT, literal, "t-denyread", "User:Ann", "*", opRead, deny),
	}
	prefixDeny := []Binding{ // alice writes a-*, but not a-secret
		bind(topicT, prefixed, "a-", "User:alice", "*", kmsg.ACLOperationAll, allow),
		bind(topicT, literal, "a-secret", "User:alice", "*", kmsg.ACLOperationAll, deny),
	}
	cluster := []Binding{
		bind(clusterT, literal, ClusterName, "User:ops", "*", kmsg.ACLOperationIdempotentWrite, allow),
		bind(txnT, prefixed, "tx-", "User:ops", "*", opWrite, allow),
	}
	type q struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
	}
	cases := []struct {
		name     string
		bindings []Binding
		mode     Mode
		q        q
		want     bool
		reason   Reason
	}{
		{"listed principal and host may read", bobAlice, DenyByDefault, q{"User:Bob", "198.51.100.1", opRead, topicT, "Test-Topic"}, true, ReasonAllowed},
		{"listed principal may write", bobAlice, DenyByDefault, q{"User:Alice", "198.51.100.0", opWrite, topicT, "Test-Topic"}, true, ReasonAllowed},
		{"other host is denied", bobAlice, DenyByDefault, q{"User:Bob", "198.51.100.9", opRead, topicT, "Test-Topic"}, false, ReasonNoMatch},
		{"other principal is denied", bobAlice, DenyByDefault, q{"User:Eve", "198.51.100.0", opRead, topicT, "Test-Topic"}, false, ReasonNoMatch},
		{"names are case sensitive", bobAlice, DenyByDefault, q{"User:Bob", "198.51.100.0", opRead, topicT, "test-topic"}, false, ReasonNoMatch},
		{"read implies describe", bobAlice, DenyByDefault, q{"User:Bob", "198.51.100.0", opDesc, topicT, "Test-Topic"}, true, ReasonAllowed},
		{"read does not imply delete", bobAlice, DenyByDefault, q{"User:Bob", "198.51.100.0", kmsg.ACLOperationDelete, topicT, "Test-Topic"}, false, ReasonNoMatch},
		{"wildcard principal allows everyone", badBob, DenyByDefault, q{"User:Bob", "10.0.0.1", opRead, topicT, "Test-topic"}, true, ReasonAllowed},
		{"deny wins over wildcard allow", badBob, DenyByDefault, q{"User:BadBob", "198.51.100.3", opRead, topicT, "Test-topic"}, false, ReasonDenied},
		{"deny only from its host", badBob, DenyByDefault, q{"User:BadBob", "198.51.100.4", opRead, topicT, "Test-topic"}, true, ReasonAllowed},
		{"prefixed pattern matches", jane, DenyByDefault, q{"User:Jane", "10.0.0.1", opWrite, topicT, "Test-orders"}, true, ReasonAllowed},
		{"prefix itself matches", jane, DenyByDefault, q{"User:Jane", "10.0.0.1", kmsg.ACLOperationCreate, topicT, "Test-"}, true, ReasonAllowed},
		{"prefix is not a substring match", jane, DenyByDefault, q{"User:Jane", "10.0.0.1", opWrite, topicT, "MyTest-orders"}, false, ReasonNoMatch},
		{"prefix is case sensitive", jane, DenyByDefault, q{"User:Jane", "10.0.0.1", opWrite, topicT, "test-orders"}, false, ReasonNoMatch},
		{"producer may not read", jane, DenyByDefault, q{"User:Jane", "10.0.0.1", opRead, topicT, "Test-orders"}, false, ReasonNoMatch},
		{"wildcard resource", wildcard, DenyByDefault, q{"User:Peter", "10.0.0.1", opRead, topicT, "anything"}, true, ReasonAllowed},
		{"wildcard resource is per type", wildcard, DenyByDefault, q{"User:Peter", "10.0.0.1", opRead, groupT, "anything"}, false, ReasonNoMatch},
		{"consumer group read", consumer, DenyByDefault, q{"User:Carol", "10.0.0.1", opRead, groupT, "billing"}, true, ReasonAllowed},
		{"consumer other group", consumer, DenyByDefault, q{"User:Carol", "10.0.0.1", opRead, groupT, "other"}, false, ReasonNoMatch},
		{"write implies describe", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-write"}, true, ReasonAllowed},
		{"delete implies describe", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-delete"}, true, ReasonAllowed},
		{"alter implies describe", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-alter"}, true, ReasonAllowed},
		{"create does not imply describe (Kafka)", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-create"}, false, ReasonNoMatch},
		{"alter configs implies describe configs", implied, DenyByDefault, q{"User:Ann", "h", kmsg.ACLOperationDescribeConfigs, topicT, "t-alterconf"}, true, ReasonAllowed},
		{"alter configs does not imply describe", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-alterconf"}, false, ReasonNoMatch},
		{"all allows every operation", implied, DenyByDefault, q{"User:Ann", "h", kmsg.ACLOperationAlterConfigs, topicT, "t-all"}, true, ReasonAllowed},
		{"deny all beats allow read", implied, DenyByDefault, q{"User:Ann", "h", opRead, topicT, "t-denyall"}, false, ReasonDenied},
		{"deny read beats allow all", implied, DenyByDefault, q{"User:Ann", "h", opRead, topicT, "t-denyread"}, false, ReasonDenied},
		{"deny read leaves write", implied, DenyByDefault, q{"User:Ann", "h", opWrite, topicT, "t-denyread"}, true, ReasonAllowed},
		{"deny read does not deny describe", implied, DenyByDefault, q{"User:Ann", "h", opDesc, topicT, "t-denyread"}, true, ReasonAllowed},
		{"literal deny beats prefixed allow", prefixDeny, DenyByDefault, q{"User:alice", "h", opWrite, topicT, "a-secret"}, false, ReasonDenied},
		{"prefixed allow elsewhere", prefixDeny, DenyByDefault, q{"User:alice", "h", opWrite, topicT, "a-orders"}, true, ReasonAllowed},
		{"literal deny is not a prefix", prefixDeny, DenyByDefault, q{"User:alice", "h", opWrite, topicT, "a-secret2"}, true, ReasonAllowed},
		{"cluster idempotent write", cluster, DenyByDefault, q{"User:ops", "h", kmsg.ACLOperationIdempotentWrite, clusterT, ClusterName}, true, ReasonAllowed},
		{"transactional id prefix", cluster, DenyByDefault, q{"User:ops", "h", opWrite, txnT, "tx-1"}, true, ReasonAllowed},
		{"no bindings: denied by default", nil, DenyByDefault, q{"User:x", "h", opRead, topicT, "t"}, false, ReasonNoMatch},
		{"no bindings for the resource: open in acl mode", bobAlice, ACL, q{"User:x", "h", opRead, topicT, "elsewhere"}, true, ReasonNoACLs},
		{"bindings on the resource: enforced in acl mode", bobAlice, ACL, q{"User:x", "h", opRead, topicT, "Test-Topic"}, false, ReasonNoMatch},
		{"anonymous follows the bindings", badBob, DenyByDefault, q{AnonymousUser, "127.0.0.1", opRead, topicT, "Test-topic"}, true, ReasonAllowed},
		{"super user bypasses deny", badBob, DenyByDefault, q{"User:root", "198.51.100.3", kmsg.ACLOperationDelete, topicT, "Test-topic"}, true, ReasonSuperUser},
		{"allow-all allows", nil, AllowAll, q{"User:x", "h", kmsg.ACLOperationDelete, clusterT, ClusterName}, true, ReasonAllowAll},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Config{Mode: c.mode, SuperUsers: []string{"User:root"}})
			a.Update(append([]Binding(nil), c.bindings...))
			d := a.Authorize(&Query{Principal: c.q.principal, Host: c.q.host, Operation: c.q.op, Resource: c.q.rt, Name: c.q.name})
			if d.Allowed != c.want || d.Reason != c.reason {
				t.Fatalf("Authorize = allowed %v (%s), want %v (%s)", d.Allowed, d.Reason, c.want, c.reason)
			}
			if (c.reason == ReasonAllowed || c.reason == ReasonDenied) && d.Binding == nil {
				t.Fatalf("decision %s names no binding", d.Reason)
			}
			if c.reason == ReasonDenied && d.Binding.Permission != deny {
				t.Fatalf("denied by %s", d.Binding)
			}
		})
	}
}

func TestDryRunComputesButPermits(t *testing.T) {
	a := New(Config{Mode: DenyByDefault, DryRun: true})
	d := a.Authorize(&Query{Principal: "User:x", Host: "h", Operation: opRead, Resource: topicT, Name: "t"})
	if d.Allowed || !d.DryRun || !d.Permits() {
		t.Fatalf("dry run decision %+v: want denied, dry run, permitted", d)
	}
}

func TestSessionCacheFollowsUpdates(t *testing.T) {
	a := New(Config{Mode: DenyByDefault})
	s := a.Session("User:alice", "127.0.0.1", "PLAINTEXT")
	if d, _ := s.Authorize(opWrite, topicT, "a-1"); d.Allowed {
		t.Fatal("allowed before any binding")
	}
	if _, hit := s.Authorize(opWrite, topicT, "a-1"); !hit {
		t.Fatal("second decision not cached")
	}
	a.Update([]Binding{bind(topicT, prefixed, "a-", "User:alice", "*", opWrite, allow)})
	d, hit := s.Authorize(opWrite, topicT, "a-1")
	if hit || !d.Allowed {
		t.Fatalf("after update: allowed %v from cache %v, want a fresh allow", d.Allowed, hit)
	}
	a.Update(nil)
	if d, _ := s.Authorize(opWrite, topicT, "a-1"); d.Allowed {
		t.Fatal("still allowed after the binding was removed")
	}
	if got := s.Operations(topicT, "a-1", TopicOperations); got != 0 {
		t.Fatalf("operations %b, want none", got)
	}
	a.Update([]Binding{bind(topicT, prefixed, "a-", "User:alice", "*", opWrite, allow)})
	want := OperationsBits([]kmsg.ACLOperation{opWrite, opDesc})
	if got := s.Operations(topicT, "a-1", TopicOperations); got != want {
		t.Fatalf("operations %b, want %b", got, want)
	}
}

func TestSessionCacheBounded(t *testing.T) {
	a := New(Config{Mode: DenyByDefault})
	s := a.Session("User:x", "h", "PLAINTEXT")
	for i := range maxCached + 10 {
		s.Authorize(opRead, topicT, fmt.Sprint(i))
	}
	if n := len(s.cache); n > maxCached {
		t.Fatalf("cache holds %d decisions, bound %d", n, maxCached)
	}
}

func TestUpdateDeduplicates(t *testing.T) {
	a := New(Config{Mode: DenyByDefault})
	b := bind(topicT, literal, "t", "User:x", "*", opRead, allow)
	a.Update([]Binding{b, b, bind(topicT, literal, "t", "User:x", "*", opWrite, allow)})
	if n := len(a.Bindings()); n != 2 {
		t.Fatalf("%d bindings, want 2", n)
	}
}

// Kafka's authorizeByResourceType (an idempotent producer's
// InitProducerId): some allow on the type not covered by a deny.
func TestAnyAllowed(t *testing.T) {
	w := func(pt kmsg.ACLResourcePatternType, name string, perm kmsg.ACLPermissionType) Binding {
		return bind(topicT, pt, name, "User:a", "*", opWrite, perm)
	}
	cases := []struct {
		name string
		bs   []Binding
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []Binding{w(literal, "t", allow)}, true},
		{"covered by literal deny", []Binding{w(literal, "t", allow), w(literal, "t", deny)}, false},
		{"covered by prefix deny", []Binding{w(prefixed, "ab", allow), w(prefixed, "a", deny)}, false},
		{"not covered by a longer prefix", []Binding{w(prefixed, "a", allow), w(prefixed, "ab", deny)}, true},
		{"wildcard deny covers all", []Binding{w(prefixed, "a", allow), w(literal, "*", deny)}, false},
		{"other principal", []Binding{bind(topicT, literal, "t", "User:b", "*", opWrite, allow)}, false},
		{"read is not write", []Binding{bind(topicT, literal, "t", "User:a", "*", opRead, allow)}, false},
	}
	for _, c := range cases {
		a := New(Config{Mode: DenyByDefault})
		a.Update(append([]Binding(nil), c.bs...))
		if got := a.Session("User:a", "h", "").AnyAllowed(opWrite, topicT); got != c.want {
			t.Errorf("%s: AnyAllowed = %v, want %v", c.name, got, c.want)
		}
	}
}
