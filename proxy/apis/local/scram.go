package local

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/credstore"
)

// SCRAMAdmin manages the SCRAM credentials that DescribeUserScramCredentials
// and AlterUserScramCredentials (KIP-554) read and change.
type SCRAMAdmin interface {
	// Allowed says whether the client of ctx may manage credentials.
	Allowed(ctx context.Context) bool
	// Users is the current view of every user's credentials.
	Users() []credstore.User
	// Upsert stores the credential derived from a salted password.
	Upsert(ctx context.Context, user, mechanism string, iterations int, salt, saltedPassword []byte) error
	// Delete removes a credential; false if it did not exist.
	Delete(ctx context.Context, user, mechanism string) (bool, error)
}

// Kafka's ScramMechanism numbers.
var scramMechanisms = map[int8]string{1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

func scramMechanismNumber(name string) int8 {
	for n, m := range scramMechanisms {
		if m == name {
			return n
		}
	}
	return 0
}

// DescribeSCRAM answers DescribeUserScramCredentials from admin (nil: no
// credential store).
func DescribeSCRAM(ctx context.Context, admin SCRAMAdmin, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	resp.Version = req.Version
	switch {
	case admin == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.UnsupportedVersion.Code, kmsg.StringPtr("no credential store")
		return resp
	case !admin.Allowed(ctx):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	byName := map[string]credstore.User{}
	users := admin.Users()
	for _, u := range users {
		byName[u.Name] = u
	}
	result := func(u credstore.User) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u.Name
		for _, c := range u.Credentials {
			r.CredentialInfos = append(r.CredentialInfos, kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{
				Mechanism: scramMechanismNumber(c.Mechanism), Iterations: int32(c.Iterations),
			})
		}
		return r
	}
	if len(req.Users) == 0 { // null or empty: every user
		for _, u := range users {
			resp.Results = append(resp.Results, result(u))
		}
		return resp
	}
	seen := map[string]int{}
	for _, ru := range req.Users {
		seen[ru.Name]++
	}
	for _, ru := range req.Users {
		u, ok := byName[ru.Name]
		r := result(u)
		r.User = ru.Name
		switch {
		case seen[ru.Name] > 1:
			r.ErrorCode, r.ErrorMessage = kerr.DuplicateResource.Code, kmsg.StringPtr("user named more than once")
			r.CredentialInfos = nil
		case !ok:
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("no credentials for user")
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// AlterSCRAM answers AlterUserScramCredentials, changing admin's
// credentials (nil: no credential store).
func AlterSCRAM(ctx context.Context, admin SCRAMAdmin, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	b := &alterBatch{admin: admin, count: map[[2]string]int{}, results: map[string]kmsg.AlterUserSCRAMCredentialsResponseResult{}}
	b.allowed = b.admin != nil && b.admin.Allowed(ctx)
	for _, del := range req.Deletions {
		b.count[[2]string{del.Name, scramMechanisms[del.Mechanism]}]++
	}
	for _, up := range req.Upsertions {
		b.count[[2]string{up.Name, scramMechanisms[up.Mechanism]}]++
	}
	for _, del := range req.Deletions {
		b.delete(ctx, del)
	}
	for _, up := range req.Upsertions {
		b.upsert(ctx, up)
	}
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.Version = req.Version
	for _, u := range b.order {
		resp.Results = append(resp.Results, b.results[u])
	}
	return resp
}

// alterBatch is one AlterUserScramCredentials request: Kafka answers once
// per user, with the user's first error.
type alterBatch struct {
	admin   SCRAMAdmin
	allowed bool
	count   map[[2]string]int // changes per user and mechanism
	results map[string]kmsg.AlterUserSCRAMCredentialsResponseResult
	order   []string
}

func (b *alterBatch) set(user string, code int16, msg string) {
	r, seen := b.results[user]
	if !seen {
		b.order = append(b.order, user)
	} else if r.ErrorCode != 0 {
		return // the first error stands
	}
	b.results[user] = kmsg.AlterUserSCRAMCredentialsResponseResult{User: user, ErrorCode: code, ErrorMessage: msgPtr(msg)}
}

// valid checks what every change needs; a user changed twice for one
// mechanism in one request is refused.
func (b *alterBatch) valid(user string, mech int8) bool {
	name, ok := scramMechanisms[mech]
	switch {
	case !b.allowed:
		b.set(user, kerr.ClusterAuthorizationFailed.Code, "")
	case user == "":
		b.set(user, kerr.UnacceptableCredential.Code, "empty user name")
	case !ok:
		b.set(user, kerr.UnsupportedSaslMechanism.Code, "unknown SCRAM mechanism")
	case b.count[[2]string{user, name}] > 1:
		b.set(user, kerr.DuplicateResource.Code, "user and mechanism named more than once")
	default:
		return true
	}
	return false
}

func (b *alterBatch) delete(ctx context.Context, del kmsg.AlterUserSCRAMCredentialsRequestDeletion) {
	if !b.valid(del.Name, del.Mechanism) {
		return
	}
	existed, err := b.admin.Delete(ctx, del.Name, scramMechanisms[del.Mechanism])
	switch {
	case err != nil:
		b.set(del.Name, kerr.UnknownServerError.Code, "credential store unavailable")
	case !existed:
		b.set(del.Name, kerr.ResourceNotFound.Code, "no such credential")
	default:
		b.set(del.Name, 0, "")
	}
}

func (b *alterBatch) upsert(ctx context.Context, up kmsg.AlterUserSCRAMCredentialsRequestUpsertion) {
	if !b.valid(up.Name, up.Mechanism) {
		return
	}
	if err := credstore.CheckIterations(int(up.Iterations)); err != nil {
		b.set(up.Name, kerr.UnacceptableCredential.Code, err.Error())
		return
	}
	if len(up.Salt) == 0 || len(up.SaltedPassword) == 0 {
		b.set(up.Name, kerr.UnacceptableCredential.Code, "empty salt or salted password")
		return
	}
	if err := b.admin.Upsert(ctx, up.Name, scramMechanisms[up.Mechanism], int(up.Iterations), up.Salt, up.SaltedPassword); err != nil {
		b.set(up.Name, kerr.UnknownServerError.Code, "credential store unavailable")
		return
	}
	b.set(up.Name, 0, "")
}

func msgPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
