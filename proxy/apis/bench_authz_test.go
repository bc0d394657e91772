package apis

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// withBindings turns on deny-by-default with 1,000 bindings, one of
// which lets the test's (anonymous) client write topic t.
func withBindings(d *Dispatcher) {
	a := authz.New(authz.Config{Mode: authz.DenyByDefault})
	bs := []authz.Binding{{
		Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: "t"},
		Entry:   authz.Entry{Principal: authz.AnonymousUser, Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow},
	}}
	for i := range 999 {
		bs = append(bs, authz.Binding{
			Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypePrefixed, Name: fmt.Sprintf("p%d-", i)},
			Entry:   authz.Entry{Principal: fmt.Sprintf("User:u%d", i%100), Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow},
		})
	}
	a.Update(bs)
	d.cfg.Authorizer = a
}

// BenchmarkProduceSplit16x3Authz is BenchmarkProduceSplit16x3 with the
// authorizer enforcing 1,000 bindings.
func BenchmarkProduceSplit16x3Authz(b *testing.B) {
	parts := make([]int32, 16)
	for i := range parts {
		parts[i] = int32(i)
	}
	d, body := benchProduce(b, parts)
	withBindings(d)
	runProduce(b, d, body)
}
