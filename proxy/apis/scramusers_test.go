package apis

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/credstore"
)

// fakeSCRAM keeps credentials in a map: user -> mechanism -> iterations.
type fakeSCRAM struct {
	allowed bool
	users   map[string]map[string]int
}

func (f *fakeSCRAM) Allowed(context.Context) bool { return f.allowed }

func (f *fakeSCRAM) Users() []credstore.User {
	var out []credstore.User
	for name, ms := range f.users {
		u := credstore.User{Name: name}
		for m, it := range ms {
			u.Credentials = append(u.Credentials, credstore.Info{Mechanism: m, Iterations: it})
		}
		out = append(out, u)
	}
	return out
}

func (f *fakeSCRAM) Upsert(_ context.Context, user, mech string, it int, _, _ []byte) error {
	if f.users[user] == nil {
		f.users[user] = map[string]int{}
	}
	f.users[user][mech] = it
	return nil
}

func (f *fakeSCRAM) Delete(_ context.Context, user, mech string) (bool, error) {
	_, ok := f.users[user][mech]
	delete(f.users[user], mech)
	return ok, nil
}

func TestSCRAMCredentialAPIs(t *testing.T) {
	admin := &fakeSCRAM{allowed: true, users: map[string]map[string]int{"alice": {"SCRAM-SHA-512": 8192}}}
	d, _, _ := newTestDispatcher(t, func(c *Config) { c.SCRAM = admin })

	desc := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	desc.Users = []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}, {Name: "nobody"}, {Name: "twice"}, {Name: "twice"}}
	dr := roundTrip(t, d, desc).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	want := map[string]int16{"alice": 0, "nobody": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code}
	for _, r := range dr.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("describe %s: code %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
		if r.User == "alice" && (len(r.CredentialInfos) != 1 || r.CredentialInfos[0].Mechanism != 2 || r.CredentialInfos[0].Iterations != 8192) {
			t.Errorf("alice described as %+v", r.CredentialInfos)
		}
	}

	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alter.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 2}, {Name: "ghost", Mechanism: 1}}
	alter.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "bob", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "dup", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "dup", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: []byte("p")},
		{Name: "nosalt", Mechanism: 2, Iterations: 4096},
	}
	ar := roundTrip(t, d, alter).(*kmsg.AlterUserSCRAMCredentialsResponse)
	wantAlter := map[string]int16{"alice": 0, "ghost": kerr.ResourceNotFound.Code, "bob": 0, "dup": kerr.DuplicateResource.Code,
		"": kerr.UnacceptableCredential.Code, "nosalt": kerr.UnacceptableCredential.Code}
	if len(ar.Results) != len(wantAlter) {
		t.Fatalf("%d results, want one per user (%d): %+v", len(ar.Results), len(wantAlter), ar.Results)
	}
	for _, r := range ar.Results {
		if r.ErrorCode != wantAlter[r.User] {
			t.Errorf("alter %q: code %d, want %d", r.User, r.ErrorCode, wantAlter[r.User])
		}
	}
	if _, ok := admin.users["alice"]["SCRAM-SHA-512"]; ok || admin.users["bob"]["SCRAM-SHA-256"] != 4096 || admin.users["dup"] != nil {
		t.Fatalf("store after alter: %+v", admin.users)
	}

	admin.allowed = false
	if dr := roundTrip(t, d, desc).(*kmsg.DescribeUserSCRAMCredentialsResponse); dr.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("describe unauthorized: code %d", dr.ErrorCode)
	}
	if ar := roundTrip(t, d, alter).(*kmsg.AlterUserSCRAMCredentialsResponse); ar.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("alter unauthorized: %+v", ar.Results)
	}
}
