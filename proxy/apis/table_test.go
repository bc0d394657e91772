package apis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// rowProblems says which parts a served row lacks or has wrong (the
// checklist at apiTable); nil for a complete row.
func rowProblems(a *api) []string {
	var p []string
	if a.kind == kindNone {
		p = append(p, "no kind")
	}
	if (a.begin != nil) == (a.serve != nil) {
		p = append(p, "begin and serve both or neither set")
	}
	switch a.auth.mode {
	case authUnset:
		p = append(p, "no auth entry: byRule, perTopic, perPartition or noAuth")
	case authRule:
		if a.auth.rule == nil {
			p = append(p, "authRule without a rule")
		}
		if a.serve == nil {
			p = append(p, "a rule needs the decoded request: give the row serve, not begin")
		}
	default:
		if a.auth.rule != nil {
			p = append(p, fmt.Sprintf("a rule, yet mode %d", a.auth.mode))
		}
	}
	if a.kind == kindPartition && (a.auth.mode != authPerPartition || a.auth.op == kmsg.ACLOperationUnknown) {
		p = append(p, "split by partition, so authorized per topic: perTopic(the operation Kafka checks)")
	}
	if a.auth.op != kmsg.ACLOperationUnknown && a.kind != kindPartition {
		p = append(p, "a topic operation on a row that is not split by partition")
	}
	if a.refusal.never != (a.auth.mode == authNone) {
		p = append(p, fmt.Sprintf("refusal.never %v for auth mode %d", a.refusal.never, a.auth.mode))
	}
	if a.auth.mode != authNone && a.refusal.denied == 0 && !a.refusal.filtered {
		p = append(p, "authorized, yet no denied code in its refusal")
	}
	return p
}

// TestEveryRowHasAuth: every served key has every part of a row (rowProblems:
// a kind, exactly one handler, how it is authorized, the topic operation of
// a partition-split API, its refusal code), and a rule only where the
// handler is given the decoded request (serve), so that the rule and the
// handler see the same request.
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
		for _, p := range rowProblems(a) {
			t.Errorf("%s: %s", name, p)
		}
	}
	if served < 40 {
		t.Fatalf("only %d served keys: the walk did not see the table", served)
	}
}

// TestWorkedExampleRow is docs/architecture.md's worked example: the row of
// a partition-split read (DescribeProducers, which kproxy does not serve)
// is complete, and taking away any one of its parts is flagged.
func TestWorkedExampleRow(t *testing.T) {
	example := api{kind: kindPartition, begin: (*Dispatcher).beginOffsets, auth: perTopic(kmsg.ACLOperationRead),
		repeatable: true, refusal: refusal{denied: kerr.TopicAuthorizationFailed.Code}}
	row := buildTable(map[kmsg.Key]api{kmsg.DescribeProducers: example})[kmsg.DescribeProducers]
	if p := rowProblems(&row); p != nil {
		t.Fatalf("the worked example's row is flagged: %q", p)
	}
	lacks := map[string]func(*api){
		"kind":           func(a *api) { a.kind = kindNone },
		"handler":        func(a *api) { a.begin = nil },
		"auth":           func(a *api) { a.auth = auth{} },
		"topic op":       func(a *api) { a.auth = perPartition },
		"denied code":    func(a *api) { a.refusal.denied = 0 },
		"second handler": func(a *api) { a.serve = (*Dispatcher).beginAdmin },
	}
	for part, remove := range lacks {
		r := row
		remove(&r)
		if rowProblems(&r) == nil {
			t.Errorf("a row without its %s is not flagged", part)
		}
	}
}

// writeVerbs begin the names of the APIs that change something: a
// repeat of an attempt that may have been processed could apply it twice.
var writeVerbs = []string{"Produce", "Create", "Delete", "Alter", "IncrementalAlter", "Add", "End", "Init",
	"OffsetCommit", "TxnOffsetCommit", "OffsetDelete", "JoinGroup", "SyncGroup", "LeaveGroup", "ConsumerGroupHeartbeat", "Write"}

func isWrite(name string) bool {
	return slices.ContainsFunc(writeVerbs, func(v string) bool { return strings.HasPrefix(name, v) })
}

// TestRepeatableRows: the table alone says which APIs' maybe-processed
// attempts are repeated (repeatable agrees with every row), and no API
// whose name says it writes is among them; a new read needs no edit here.
func TestRepeatableRows(t *testing.T) {
	reads := 0
	for k := range numKeys {
		name := kmsg.NameForKey(int16(k))
		if repeatable(int16(k)) != apiTable[k].repeatable {
			t.Errorf("repeatable(%s) disagrees with its row", name)
		}
		if apiTable[k].repeatable {
			reads++
			if isWrite(name) {
				t.Errorf("%s is repeatable: a late repeat would write twice", name)
			}
		}
	}
	if reads < 10 {
		t.Fatalf("only %d repeatable rows: the walk did not see the table", reads)
	}
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.OffsetCommit, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.CreateTopics, kmsg.DeleteRecords, kmsg.AlterConfigs} {
		if !isWrite(k.Name()) {
			t.Errorf("isWrite(%s) = false", k.Name())
		}
	}
	for _, k := range []kmsg.Key{kmsg.Fetch, kmsg.Heartbeat, kmsg.DescribeConfigs, kmsg.OffsetFetch, kmsg.ListOffsets} {
		if isWrite(k.Name()) {
			t.Errorf("isWrite(%s) = true", k.Name())
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
