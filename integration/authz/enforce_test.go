package authz

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

const anon = authz.AnonymousUser

func b(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) authz.Binding {
	return authz.Binding{
		Pattern: authz.Pattern{Type: rt, PatternType: pt, Name: name},
		Entry:   authz.Entry{Principal: anon, Host: "*", Operation: op, Permission: perm},
	}
}

// anonBindings: the unauthenticated client may write and read topics
// a-*, not a-secret, use group g-ok, and alter ACLs.
func anonBindings() []authz.Binding {
	const (
		topic   = kmsg.ACLResourceTypeTopic
		lit     = kmsg.ACLResourcePatternTypeLiteral
		pre     = kmsg.ACLResourcePatternTypePrefixed
		allowed = kmsg.ACLPermissionTypeAllow
	)
	return []authz.Binding{
		b(topic, pre, "a-", kmsg.ACLOperationWrite, allowed),
		b(topic, pre, "a-", kmsg.ACLOperationRead, allowed),
		b(topic, lit, "a-secret", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny),
		b(kmsg.ACLResourceTypeGroup, lit, "g-ok", kmsg.ACLOperationRead, allowed),
		b(kmsg.ACLResourceTypeCluster, lit, authz.ClusterName, kmsg.ACLOperationAlter, allowed),
	}
}

// setup creates the topics directly on a broker (brokers do not
// authorize) and writes the bindings to etcd.
func setup(t *testing.T, c *devcluster.Cluster, bindings []authz.Binding, topics ...string) {
	t.Helper()
	ctx := testCtx(t)
	adm := newAdmin(t, c.BrokerAddr(c.BrokerIDs()[0]))
	if _, err := adm.CreateTopics(ctx, 2, -1, nil, topics...); err != nil {
		t.Fatalf("create topics: %v", err)
	}
	if _, err := aclstore.Create(ctx, c.Client(), layout.New(""), bindings); err != nil {
		t.Fatal(err)
	}
}

// rawClient speaks Kafka 3.0's versions, whose Produce and Fetch name
// topics (from 3.1 on they carry ids), so raw requests can be built by name.
func rawClient(t *testing.T, addr string) *kgo.Client {
	return newClient(t, addr, kgo.MaxVersions(rawVersions))
}

var rawVersions = kversion.V3_0_0()

// produceRaw sends one Produce naming both topics' partition 0.
func produceRaw(t *testing.T, cl *kgo.Client, topics ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	for _, topic := range topics {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, Values: kwiretest.Values("v")}.Encode()
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes[rt.Topic] = p.ErrorCode
		}
	}
	return codes
}

func TestEnforcementAnonymous(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault})
	setup(t, c, anonBindings(), "a-orders", "a-secret", "b-other")
	proxy := c.ProxyAddrs()[0]
	cl := rawClient(t, proxy)

	within(t, time.Second, "produce allowed on a-orders", func() error {
		return kerr.ErrorForCode(produceRaw(t, cl, "a-orders")["a-orders"])
	})
	// One request, two topics: the allowed partition is written, the
	// denied one answers TOPIC_AUTHORIZATION_FAILED.
	codes := produceRaw(t, cl, "a-orders", "a-secret", "b-other")
	if codes["a-orders"] != 0 || codes["a-secret"] != kerr.TopicAuthorizationFailed.Code || codes["b-other"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mixed produce codes %v: want a-orders 0, a-secret and b-other 29", codes)
	}

	// kgo as a producer: its metadata for a-secret answers 29, and the
	// record fails with it.
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "a-secret", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("kgo produce to a-secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Metadata for all topics lists only what may be described.
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if names := md.Topics.Names(); len(names) != 1 || names[0] != "a-orders" {
		t.Fatalf("all-topics metadata lists %v, want [a-orders]", names)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"a-secret", "a-orders", "a-absent"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mreq.AllowAutoTopicCreation, mreq.IncludeTopicAuthorizedOperations = true, true
	mresp, err := mreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	wantOps := authz.OperationsBits([]kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe})
	for _, mt := range mresp.Topics {
		switch *mt.Topic {
		case "a-secret", "a-absent": // denied; absent and not creatable
			if mt.ErrorCode != kerr.TopicAuthorizationFailed.Code {
				t.Fatalf("named metadata for %s: code %d, want TOPIC_AUTHORIZATION_FAILED", *mt.Topic, mt.ErrorCode)
			}
		case "a-orders":
			if mt.ErrorCode != 0 || mt.AuthorizedOperations != wantOps {
				t.Fatalf("a-orders: code %d, operations %b; want 0, %b", mt.ErrorCode, mt.AuthorizedOperations, wantOps)
			}
		}
	}

	// Fetch: a-secret's partition answers 29, a-orders' records come.
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MaxBytes = 100, 1<<20
	for _, topic := range []string{"a-orders", "a-secret"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		freq.Topics = append(freq.Topics, ft)
	}
	fresp, err := freq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range fresp.Topics {
		want := int16(0)
		if ft.Topic == "a-secret" {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if got := ft.Partitions[0].ErrorCode; got != want {
			t.Fatalf("fetch %s: code %d, want %d", ft.Topic, got, want)
		}
	}

	// Offset commits: g-ok works, another group answers 30.
	commit := func(group string) error {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "a-orders", Partition: 0, At: 1, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(testCtx(t), group, os)
		if err != nil {
			return err
		}
		return r.Error()
	}
	if err := commit("g-ok"); err != nil {
		t.Fatalf("commit in g-ok: %v", err)
	}
	if err := commit("g-other"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("commit in g-other: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// Admin: creating and deleting topics needs Create and Delete.
	ct, err := adm.CreateTopics(testCtx(t), 1, -1, nil, "a-new")
	if err != nil || !errors.Is(ct["a-new"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create a-new: %+v, %v; want TOPIC_AUTHORIZATION_FAILED", ct, err)
	}
	dt, err := adm.DeleteTopics(testCtx(t), "a-orders")
	if err != nil || !errors.Is(dt["a-orders"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete a-orders: %+v, %v; want TOPIC_AUTHORIZATION_FAILED", dt, err)
	}
}

// A binding removed through one proxy stops traffic through the other
// within a second.
func TestRemovalReachesOtherProxy(t *testing.T) {
	c := startCluster(t, 2, authz.Config{Mode: authz.DenyByDefault})
	setup(t, c, anonBindings(), "a-orders")
	one, two := rawClient(t, c.ProxyAddrs()[0]), rawClient(t, c.ProxyAddrs()[1])
	// Both proxies must hold the bindings (one transaction, so a produce
	// allowed means the cluster's Alter is there too) before the first
	// deletes one: the first's view may trail the second's.
	for _, p := range []struct {
		name string
		cl   *kgo.Client
	}{{"first", one}, {"second", two}} {
		within(t, 2*time.Second, "produce through the "+p.name+" proxy", func() error {
			return kerr.ErrorForCode(produceRaw(t, p.cl, "a-orders")["a-orders"])
		})
	}
	res, err := kadm.NewClient(one).DeleteACLs(testCtx(t), kadm.NewACLs().Allow(anon).AllowHosts().
		Topics("a-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs through the first proxy: %+v, %v", res, err)
	}
	took := within(t, time.Second, "produce refused through the second proxy", func() error {
		if c := produceRaw(t, two, "a-orders")["a-orders"]; c != kerr.TopicAuthorizationFailed.Code {
			return kerr.ErrorForCode(c)
		}
		return nil
	})
	t.Logf("removal enforced by the other proxy after %v", took)
}

// Dry run: a denied produce goes through.
func TestDryRunDoesNotEnforce(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault, DryRun: true})
	setup(t, c, nil, "b-other")
	cl := newClient(t, c.ProxyAddrs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b-other", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("dry-run produce: %v", err)
	}
}

// Groups, transactions and configs, as Kafka answers them.
func TestEnforcementGroupsTransactionsConfigs(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault})
	setup(t, c, anonBindings(), "a-orders", "a-secret")
	cl := rawClient(t, c.ProxyAddrs()[0])
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	within(t, time.Second, "bindings in force", func() error {
		return kerr.ErrorForCode(produceRaw(t, cl, "a-orders")["a-orders"])
	})

	// A commit in g-ok naming an allowed and a denied topic: the allowed
	// partition is committed, the denied one answers 29.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g-ok", -1
	for _, tp := range []string{"a-orders", "a-secret"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Offset = 1
		rt.Partitions = append(rt.Partitions, p)
		oc.Topics = append(oc.Topics, rt)
	}
	ocr, err := oc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int16{}
	for _, rt := range ocr.Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if len(got) != 2 || got["a-orders"] != 0 || got["a-secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mixed commit codes %v: want a-orders 0, a-secret 29", got)
	}

	// OffsetFetch (v8, groups batched): a denied topic asked for answers
	// 29; asked for every topic, the group's denied topics are left out
	// (a-secret's offset committed straight on a broker, which does not
	// authorize).
	direct := kadm.Offsets{}
	direct.Add(kadm.Offset{Topic: "a-secret", Partition: 0, At: 7, LeaderEpoch: -1})
	if r, err := newAdmin(t, c.BrokerAddr(c.BrokerIDs()[0])).CommitOffsets(ctx, "g-ok", direct); err != nil || r.Error() != nil {
		t.Fatalf("commit a-secret on the broker: %v %v", err, r.Error())
	}
	fetchOffsets := func(topics ...string) map[string]int16 {
		t.Helper()
		of := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g-ok"
		for _, tp := range topics {
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = tp, []int32{0}
			g.Topics = append(g.Topics, gt)
		}
		of.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp, err := of.RequestWith(ctx, cl)
		if err != nil || len(resp.Groups) != 1 || resp.Version < 8 {
			t.Fatalf("OffsetFetch: %+v, %v", resp, err)
		}
		out := map[string]int16{}
		for _, rt := range resp.Groups[0].Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := fetchOffsets("a-orders", "a-secret"); len(got) != 2 || got["a-orders"] != 0 || got["a-secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("OffsetFetch of a-orders and a-secret: %v; want 0 and 29", got)
	}
	onBroker, err := newAdmin(t, c.BrokerAddr(c.BrokerIDs()[0])).FetchOffsets(ctx, "g-ok")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := onBroker.Lookup("a-secret", 0); !ok {
		t.Fatal("the broker holds no offset of a-secret in g-ok: the filter below would prove nothing")
	}
	if got := fetchOffsets(); len(got) != 1 || got["a-orders"] != 0 {
		t.Fatalf("OffsetFetch of every topic: %v; want a-orders only", got)
	}

	// FindCoordinator: a group the principal may not describe answers 30.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g-ok", "g-other"}
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range fresp.Coordinators {
		want := int16(0)
		if co.Key == "g-other" {
			want = kerr.GroupAuthorizationFailed.Code
		}
		if co.ErrorCode != want {
			t.Fatalf("FindCoordinator %s: code %d, want %d", co.Key, co.ErrorCode, want)
		}
	}

	// DescribeGroups: a group the principal may not describe answers 30;
	// authorized operations are filled when asked.
	describeGroup := func(group string) (*kmsg.DescribeGroupsResponseGroup, error) {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups, dg.IncludeAuthorizedOperations = []string{group}, true
		dgr, err := dg.RequestWith(ctx, cl)
		if err != nil {
			return nil, err // kgo reports a group's error code as the request's
		}
		if len(dgr.Groups) != 1 {
			t.Fatalf("DescribeGroups %s: %+v", group, dgr)
		}
		return &dgr.Groups[0], kerr.ErrorForCode(dgr.Groups[0].ErrorCode)
	}
	okGroup, err := describeGroup("g-ok")
	if want := authz.OperationsBits([]kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe}); err != nil || okGroup.AuthorizedOperations != want {
		t.Fatalf("DescribeGroups g-ok: %+v, %v; want operations %b", okGroup, err, want)
	}
	if _, err := describeGroup("g-other"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("DescribeGroups g-other: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// ListGroups without Describe on the cluster: only describable groups.
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range lg.Groups() {
		if g != "g-ok" {
			t.Fatalf("ListGroups shows %q", g)
		}
	}

	// InitProducerId: idempotent (Write on some topic suffices), and
	// transactional with an id the principal may not write: 53.
	ip := kmsg.NewPtrInitProducerIDRequest()
	ipr, err := ip.RequestWith(ctx, cl)
	if err != nil || ipr.ErrorCode != 0 {
		t.Fatalf("idempotent InitProducerId: %+v, %v", ipr, err)
	}
	ip.TransactionalID = kmsg.StringPtr("tx-1")
	ipr, err = ip.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ipr.ErrorCode) // kgo reports it as err or leaves it in the answer
	}
	if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("transactional InitProducerId: %v; want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", err)
	}

	// DescribeConfigs: the topic needs DescribeConfigs (29), the broker
	// DescribeConfigs on the cluster (31).
	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		rt   kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, "a-orders"}, {kmsg.ConfigResourceTypeBroker, "0"}} {
		x := kmsg.NewDescribeConfigsRequestResource()
		x.ResourceType, x.ResourceName = r.rt, r.name
		dc.Resources = append(dc.Resources, x)
	}
	dresp, err := dc.RequestWith(ctx, cl)
	if err != nil || len(dresp.Resources) != 2 {
		t.Fatalf("DescribeConfigs: %+v, %v", dresp, err)
	}
	for _, x := range dresp.Resources {
		want := kerr.TopicAuthorizationFailed.Code
		if x.ResourceType == kmsg.ConfigResourceTypeBroker {
			want = kerr.ClusterAuthorizationFailed.Code
		}
		if x.ErrorCode != want {
			t.Fatalf("DescribeConfigs %v %s: code %d, want %d", x.ResourceType, x.ResourceName, x.ErrorCode, want)
		}
	}
}

// TestOffsetForLeaderEpochClusterAction: OffsetForLeaderEpoch needs
// Describe on each topic (a-orders yes, b-other 29), or ClusterAction on the
// cluster, which brokers' followers have and which allows every topic.
func TestOffsetForLeaderEpochClusterAction(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault})
	setup(t, c, anonBindings(), "a-orders", "b-other")
	cl := rawClient(t, c.ProxyAddrs()[0])
	codes := func() map[string]int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		for _, topic := range []string{"a-orders", "b-other"} {
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = topic
			p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			p.CurrentLeaderEpoch, p.LeaderEpoch = -1, 0
			rt.Partitions = append(rt.Partitions, p)
			req.Topics = append(req.Topics, rt)
		}
		// To the proxy itself: kgo would shard by partition leader and turn
		// b-other's denied metadata into an error for the whole request.
		raw, err := cl.SeedBrokers()[0].Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int16{}
		for _, rt := range raw.(*kmsg.OffsetForLeaderEpochResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	denied := kerr.TopicAuthorizationFailed.Code
	within(t, time.Second, "the bindings in force", func() error {
		if got := codes(); got["a-orders"] == denied || got["b-other"] != denied {
			return fmt.Errorf("codes %v: want a-orders allowed, b-other 29", got)
		}
		return nil
	})
	grant := b(kmsg.ACLResourceTypeCluster, kmsg.ACLResourcePatternTypeLiteral, authz.ClusterName,
		kmsg.ACLOperationClusterAction, kmsg.ACLPermissionTypeAllow)
	if _, err := aclstore.Create(testCtx(t), c.Client(), layout.New(""), []authz.Binding{grant}); err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "ClusterAction to allow every topic", func() error {
		if got := codes(); got["a-orders"] == denied || got["b-other"] == denied {
			return fmt.Errorf("codes %v: want neither 29", got)
		}
		return nil
	})
}
