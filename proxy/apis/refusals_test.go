package apis

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// authFailed are Kafka's codes for a denied request.
var authFailed = []int16{
	kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code,
	kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code,
}

// fillRequest gives every list of a request one entry (recursively), every
// name and id a value, so that a refusal has entries to answer.
func fillRequest(v reflect.Value, depth int) {
	if depth > answer.MaxDepth+1 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && f.Name != "Version" && f.Name != "UnknownTags" {
				fillRequest(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("x"))
			return
		}
		e := reflect.New(v.Type().Elem()).Elem()
		fillRequest(e, depth+1)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		fillRequest(e.Elem(), depth+1)
		v.Set(e)
	case reflect.String:
		v.SetString(fmt.Sprintf("e%d", depth))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Array:
		if v.Len() > 0 && v.Index(0).Kind() == reflect.Uint8 {
			v.Index(0).SetUint(1) // a topic id
		}
	}
}

// requestWithEntries builds key's request at version with entries, as
// it reads off the wire (fields the version lacks are dropped).
func requestWithEntries(t *testing.T, key, version int16) kmsg.Request {
	t.Helper()
	req := kmsg.RequestForKey(key)
	fillRequest(reflect.ValueOf(req).Elem(), 0)
	req.SetVersion(version)
	wire := kmsg.RequestForKey(key)
	wire.SetVersion(version)
	if err := wire.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d: decode filled request: %v", kmsg.NameForKey(key), version, err)
	}
	return wire
}

// codes lists the error codes of every entry of a response (fields named
// ErrorCode in list elements, at any depth) and its top-level code.
func codes(v reflect.Value, depth int, top *int16, entries *[]int16) {
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		if depth == 0 {
			*top = int16(f.Int())
		} else {
			*entries = append(*entries, int16(f.Int()))
		}
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		for j := range f.Len() {
			codes(f.Index(j), depth+1, top, entries)
		}
	}
}

// checkRefused encodes refuse(req, code) at req's version, decodes it as a
// client would and requires the code on every entry, and somewhere.
func checkRefused(t *testing.T, req kmsg.Request, code int16) {
	t.Helper()
	name := fmt.Sprintf("%s v%d code %d", kmsg.NameForKey(req.Key()), req.GetVersion(), code)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(refuse(req, code).AppendTo(nil)); err != nil {
		t.Fatalf("%s: decode refusal: %v", name, err)
	}
	var top int16
	var entries []int16
	codes(reflect.ValueOf(resp).Elem(), 0, &top, &entries)
	for i, c := range entries {
		if c != code {
			t.Errorf("%s: entry %d answers %d, want %d", name, i, c, code)
		}
	}
	if top != code && len(entries) == 0 {
		t.Errorf("%s: the refusal carries no code (top-level %d, no entries): it reads as success", name, top)
	}
}

// TestRefusalTableCoversEveryAPI walks every key kmsg knows: a key the
// table serves must have a refusal row (so a new API without one fails
// here) with a Kafka authorization code, and for every key and version
// the denied and unsupported answers carry the code on every entry.
func TestRefusalTableCoversEveryAPI(t *testing.T) {
	served := 0
	for k := range numKeys {
		key := int16(k)
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		row := apiTable[k]
		r := row.refusal
		if r.unsupported != kerr.UnsupportedVersion.Code {
			t.Errorf("%s: unsupported code %d, want UNSUPPORTED_VERSION", kmsg.NameForKey(key), r.unsupported)
		}
		if row.served() {
			served++
			switch {
			case r.never || r.filtered:
				if r.denied != 0 {
					t.Errorf("%s: never or filtered, yet denied %d", kmsg.NameForKey(key), r.denied)
				}
			case !slices.Contains(authFailed, r.denied):
				t.Errorf("%s: served without a denied code (got %d): add its refusal to its row in table.go", kmsg.NameForKey(key), r.denied)
			}
			if row.kind == kindNone {
				t.Errorf("%s: served without a kind", kmsg.NameForKey(key))
			}
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			if key == int16(kmsg.ApiVersions) {
				continue // answered by the v0 fallback (TestApiVersionsFallback)
			}
			filled := requestWithEntries(t, key, v)
			checkRefused(t, filled, r.unsupported)
			if row.served() && r.denied != 0 {
				checkRefused(t, filled, r.denied)
			}
		}
	}
	if served < 40 {
		t.Fatalf("only %d served keys: the walk did not see the table", served)
	}
}

// TestRefusalsFromIssue are the refusals that read as success: each
// answers per entry now.
func TestRefusalsFromIssue(t *testing.T) {
	tests := []struct {
		key     kmsg.Key
		version int16
	}{
		{kmsg.DeleteGroups, 2}, {kmsg.DescribeGroups, 5}, {kmsg.ConsumerGroupDescribe, 0},
		{kmsg.AlterUserSCRAMCredentials, 0}, {kmsg.AddPartitionsToTxn, 3}, {kmsg.DescribeProducers, 0},
		{kmsg.WriteTxnMarkers, 1}, {kmsg.ElectLeaders, 2},
	}
	for _, tt := range tests {
		t.Run(kmsg.NameForKey(int16(tt.key)), func(t *testing.T) {
			req := requestWithEntries(t, int16(tt.key), tt.version)
			resp := refuse(req, kerr.ClusterAuthorizationFailed.Code)
			var top int16
			var entries []int16
			codes(reflect.ValueOf(resp).Elem(), 0, &top, &entries)
			if len(entries) == 0 {
				t.Fatalf("no entry answered")
			}
			for _, c := range entries {
				if c != kerr.ClusterAuthorizationFailed.Code {
					t.Fatalf("entries answer %v", entries)
				}
			}
		})
	}
}

// TestDeniedGroupsAnswerPerGroup sends DeleteGroups, DescribeGroups and
// ConsumerGroupDescribe with no ACLs (deny by default): every group
// answers GROUP_AUTHORIZATION_FAILED, none 0, and nothing reaches a broker.
func TestDeniedGroupsAnswerPerGroup(t *testing.T) {
	d, f, _ := newTestDispatcher(t, func(c *Config) { c.Authorizer = authz.New(authz.Config{Mode: authz.DenyByDefault}) })
	groups := []string{"g1", "g2"}
	check := func(name string, got []int16) {
		t.Helper()
		if len(got) != len(groups) {
			t.Fatalf("%s: %d answers for %d groups", name, len(got), len(groups))
		}
		for i, c := range got {
			if c != kerr.GroupAuthorizationFailed.Code {
				t.Errorf("%s: group %s answers %d, want GROUP_AUTHORIZATION_FAILED", name, groups[i], c)
			}
		}
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, groups
	var got []int16
	for _, g := range roundTrip(t, d, del).(*kmsg.DeleteGroupsResponse).Groups {
		got = append(got, g.ErrorCode)
	}
	check("DeleteGroups", got)
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Version, desc.Groups = 5, groups
	got = nil
	for _, g := range roundTrip(t, d, desc).(*kmsg.DescribeGroupsResponse).Groups {
		got = append(got, g.ErrorCode)
	}
	check("DescribeGroups", got)
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = groups
	got = nil
	for _, g := range roundTrip(t, d, cgd).(*kmsg.ConsumerGroupDescribeResponse).Groups {
		got = append(got, g.ErrorCode)
	}
	check("ConsumerGroupDescribe", got)
	for _, k := range []kmsg.Key{kmsg.DeleteGroups, kmsg.DescribeGroups, kmsg.ConsumerGroupDescribe} {
		if n := len(f.requests(k)); n != 0 {
			t.Errorf("%s: %d requests reached a broker", kmsg.NameForKey(int16(k)), n)
		}
	}
}

// TestDeniedAlterSCRAMAnswersPerUser: a principal without Alter on the
// cluster gets CLUSTER_AUTHORIZATION_FAILED for each user, not an empty
// list (which kadm reads as success).
func TestDeniedAlterSCRAMAnswersPerUser(t *testing.T) {
	d, _, _ := newTestDispatcher(t, func(c *Config) {
		c.Authorizer = authz.New(authz.Config{Mode: authz.DenyByDefault})
		c.SCRAM = &fakeSCRAM{allowed: true}
	})
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "bob", Mechanism: 1}}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "carol", Mechanism: 2, Iterations: 8192, Salt: []byte("s"), SaltedPassword: []byte("p")}}
	resp := roundTrip(t, d, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 {
		t.Fatalf("%d results, want one per user (bob, carol): %+v", len(resp.Results), resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("user %s answers %d, want CLUSTER_AUTHORIZATION_FAILED", r.User, r.ErrorCode)
		}
	}
}

// TestPoolUnsupportedAnswersPerEntry: an API a live broker does not serve
// (DeleteGroups here, and ElectLeaders, which the proxy never serves)
// answers UNSUPPORTED_VERSION on every entry, never 0.
func TestPoolUnsupportedAnswersPerEntry(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.versions[2] = map[int16]vrange{int16(kmsg.DeleteGroups): noVersions}
	apiVersions(t, d, 3) // the proxy learns the pool's versions
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g1", "g2"}
	resp := roundTrip(t, d, del).(*kmsg.DeleteGroupsResponse)
	if len(resp.Groups) != 2 {
		t.Fatalf("%d groups answered, want 2", len(resp.Groups))
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("DeleteGroups %s unsupported by the pool: code %d, want UNSUPPORTED_VERSION", g.Group, g.ErrorCode)
		}
	}
	el := kmsg.NewPtrElectLeadersRequest()
	el.Version = 2
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
	er := roundTrip(t, d, el).(*kmsg.ElectLeadersResponse)
	if len(er.Topics) != 1 || len(er.Topics[0].Partitions) != 2 {
		t.Fatalf("ElectLeaders answered %+v, want both partitions", er.Topics)
	}
	for _, p := range er.Topics[0].Partitions {
		if p.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ElectLeaders partition %d: code %d, want UNSUPPORTED_VERSION", p.Partition, p.ErrorCode)
		}
	}
}
