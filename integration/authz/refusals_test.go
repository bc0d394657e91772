package authz

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// TestRefusalsReadAsRefusals drives the refusals with kadm and raw
// requests against a deny-by-default proxy, as an anonymous client that
// may only describe groups g1 and g2 (so that kadm finds their
// coordinator): deleting them is refused per group, changing a password
// is refused per user (neither reads as success), and a topic asked for
// by id alone is not described.
func TestRefusalsReadAsRefusals(t *testing.T) {
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault})
	describe := func(g string) authz.Binding {
		return b(kmsg.ACLResourceTypeGroup, kmsg.ACLResourcePatternTypeLiteral, g, kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow)
	}
	setup(t, c, []authz.Binding{describe("g1"), describe("g2")}, "payroll")
	ctx := testCtx(t)
	adm := newAdmin(t, c.ProxyAddrs()[0])

	var deleted kadm.DeleteGroupResponses
	within(t, 10*time.Second, "the bindings reach the proxy", func() (err error) {
		deleted, err = adm.DeleteGroups(ctx, "g1", "g2")
		return err
	})
	for _, g := range []string{"g1", "g2"} {
		if r, ok := deleted[g]; !ok || !errors.Is(r.Err, kerr.GroupAuthorizationFailed) {
			t.Errorf("DeleteGroups %s: %+v, want GROUP_AUTHORIZATION_FAILED", g, r)
		}
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "taken-over"}})
	if err == nil {
		err = errors.New("no result for carol")
		if r, ok := altered["carol"]; ok {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("AlterUserScramCredentials as anonymous: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	// Metadata v12 by id: the id is on /v1/routes; the name must not be.
	broker := newAdmin(t, c.BrokerAddr(c.BrokerIDs()[0]))
	topics, err := broker.ListTopics(ctx, "payroll")
	if err != nil || topics["payroll"].Err != nil {
		t.Fatalf("payroll's id from a broker: %v %+v", err, topics)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: topics["payroll"].ID}}
	cl := newClient(t, c.ProxyAddrs()[0])
	var resp *kmsg.MetadataResponse
	// The broker knows the topic once CreateTopics returns; the proxy once
	// its watch brings the topic's partitions. Until then it rightly
	// answers UNKNOWN_TOPIC_ID (CI once asked in between), so ask again
	// until it knows the id; what it answers then is the refusal under test.
	within(t, 10*time.Second, "the proxy learns payroll's id", func() error {
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("metadata by id: %w", err)
		}
		if len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == kerr.UnknownTopicID.Code {
			return kerr.UnknownTopicID
		}
		return nil
	})
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.Topics[0].Topic != nil || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("Metadata v12 by id without Describe: %+v, want TOPIC_AUTHORIZATION_FAILED with no name", resp.Topics)
	}
}
