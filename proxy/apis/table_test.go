package apis

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// TestEveryRowHasAuth: every served key says how it is authorized (a
// rule, per partition, or none), has exactly one handler, and a rule only
// where the handler is given the decoded request (serve), so that the rule
// and the handler see the same request.
func TestEveryRowHasAuth(t *testing.T) {
	served := 0
	for k := range numKeys {
		a := &apiTable[k]
		name := kmsg.NameForKey(int16(k))
		if !a.served() {
			if a.auth.mode != authUnset || a.auth.rule != nil {
				t.Errorf("%s: not served, yet an auth entry", name)
			}
			continue
		}
		served++
		switch a.auth.mode {
		case authUnset:
			t.Errorf("%s: no auth entry in its row: byRule, perPartition or noAuth", name)
		case authRule:
			if a.auth.rule == nil {
				t.Errorf("%s: authRule without a rule", name)
			}
		default:
			if a.auth.rule != nil {
				t.Errorf("%s: a rule, yet mode %d", name, a.auth.mode)
			}
		}
		if (a.begin != nil) == (a.serve != nil) {
			t.Errorf("%s: begin and serve both or neither set", name)
		}
		if a.auth.mode == authRule && a.serve == nil {
			t.Errorf("%s: a rule needs the decoded request: give the row serve, not begin", name)
		}
		if a.refusal.never != (a.auth.mode == authNone) {
			t.Errorf("%s: refusal.never %v for auth mode %d", name, a.refusal.never, a.auth.mode)
		}
		if a.kind == kindPartition && a.auth.mode != authPerPartition {
			t.Errorf("%s: split by partition, so authorized per partition", name)
		}
	}
	if served < 40 {
		t.Fatalf("only %d served keys: the walk did not see the table", served)
	}
}

// TestRepeatableRows: the APIs whose maybe-processed attempts are repeated
// are the reads and Heartbeat (what retry's own list held before the rows
// carried it), never a write.
func TestRepeatableRows(t *testing.T) {
	want := []kmsg.Key{
		kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.OffsetFetch, kmsg.FindCoordinator, kmsg.Heartbeat,
		kmsg.DescribeGroups, kmsg.ListGroups, kmsg.ApiVersions, kmsg.OffsetForLeaderEpoch, kmsg.DescribeConfigs,
		kmsg.DescribeCluster, kmsg.ConsumerGroupDescribe,
	}
	var got []kmsg.Key
	for k := range numKeys {
		if apiTable[k].repeatable {
			got = append(got, kmsg.Key(k))
		}
		if repeatable(int16(k)) != apiTable[k].repeatable {
			t.Errorf("repeatable(%s) disagrees with its row", kmsg.NameForKey(int16(k)))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("repeatable rows %v, want %v", got, want)
	}
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.CreateTopics, kmsg.DeleteRecords} {
		if repeatable(int16(k)) {
			t.Errorf("%s is repeatable: a late repeat would write twice", k.Name())
		}
	}
	if repeatable(-1) || repeatable(numKeys) {
		t.Error("a key outside the table is repeatable")
	}
}

// TestAuthorizedKeys: every key the authorizer is asked about has its own
// metric label (the six the old hand-kept list lacked included).
func TestAuthorizedKeys(t *testing.T) {
	keys := AuthorizedKeys()
	for k := range numKeys {
		m := apiTable[k].auth.mode
		if in := slices.Contains(keys, int16(k)); in != (m == authRule || m == authPerPartition) {
			t.Errorf("%s: in AuthorizedKeys %v, auth mode %d", kmsg.NameForKey(int16(k)), in, m)
		}
	}
	for _, k := range []kmsg.Key{kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe, kmsg.DescribeLogDirs,
		kmsg.DescribeClientQuotas, kmsg.AlterClientQuotas, kmsg.DescribeUserSCRAMCredentials, kmsg.AlterUserSCRAMCredentials} {
		if !slices.Contains(keys, int16(k)) {
			t.Errorf("%s has a rule but no label", k.Name())
		}
	}
	if slices.Contains(keys, int16(kmsg.ApiVersions)) || slices.Contains(keys, int16(kmsg.SASLHandshake)) {
		t.Error("an API Kafka never authorizes has a label")
	}
}

// TestServeDecodedOnce: with checks on, the rule and the handler get the
// same decoded request, and the handler's body is the stripped request's
// encoding.
func TestServeDecodedOnce(t *testing.T) {
	d, _, _ := newTestDispatcher(t, func(c *Config) { c.Authorizer = authz.New(authz.Config{Mode: authz.DenyByDefault}) })
	var ruleSaw, serveSaw kmsg.Request
	var served []byte
	row := &api{
		kind: kindGroup,
		auth: byRule(func(g authrule.Guard, req kmsg.Request, v *authrule.Verdict) {
			ruleSaw = req
			r := req.(*kmsg.DeleteGroupsRequest)
			r.Groups, v.Stripped = r.Groups[:1], true // as a rule leaving out g2
		}),
		serve: func(_ *Dispatcher, _ context.Context, _ uint64, _ Header, req kmsg.Request, body []byte) (op, Reply, error) {
			serveSaw, served = req, append([]byte(nil), body...)
			return nil, Reply{Body: []byte{1}}, nil
		},
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"g1", "g2"}
	h := Header{Key: req.Key(), Version: req.Version}
	if _, _, err := d.serveDecoded(context.Background(), 1, h, req.AppendTo(nil), row); err != nil {
		t.Fatal(err)
	}
	if ruleSaw == nil || ruleSaw != serveSaw {
		t.Fatalf("rule saw %p, handler %p: want one decoded request", ruleSaw, serveSaw)
	}
	got := kmsg.NewPtrDeleteGroupsRequest()
	got.Version = 2
	if err := got.ReadFrom(served); err != nil || !slices.Equal(got.Groups, []string{"g1"}) {
		t.Errorf("handler's body decodes to %v (%v), want the stripped [g1]", got.Groups, err)
	}
}
