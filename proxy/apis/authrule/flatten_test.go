package authrule

import (
	"context"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// The helpers of the rule tests: a principal's bindings, a guard over
// them, and flat views of requests and responses (name -> code) so that
// each case states what it expects in one line.

const (
	topicT   = kmsg.ACLResourceTypeTopic
	groupT   = kmsg.ACLResourceTypeGroup
	clusterT = kmsg.ACLResourceTypeCluster
	txnT     = kmsg.ACLResourceTypeTransactionalId
)

// grant is one allow binding for the test's principal.
type grant struct {
	rt   kmsg.ACLResourceType
	name string
	op   kmsg.ACLOperation
}

const principalName = "User:alice"

// names resolves the test's topic ids (id[0] = 1: "byid").
type names struct{}

func (names) TopicName(id [16]byte) (string, bool) {
	if id[0] == 1 {
		return "byid", true
	}
	return "", false
}

func guardOf(key kmsg.Key, grants ...grant) Guard {
	a := authz.New(authz.Config{Mode: authz.DenyByDefault})
	var bs []authz.Binding
	for _, g := range grants {
		name := g.name
		if g.rt == clusterT {
			name = authz.ClusterName
		}
		bs = append(bs, authz.Binding{
			Pattern: authz.Pattern{Type: g.rt, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: name},
			Entry:   authz.Entry{Principal: principalName, Host: "*", Operation: g.op, Permission: kmsg.ACLPermissionTypeAllow},
		})
	}
	a.Update(bs)
	return NewGuard(context.Background(), int16(key), a.Session(principalName, "127.0.0.1", "PLAINTEXT"), &Env{Names: names{}})
}

// entryName is the name of an entry of a request or response list: its
// topic, group, resource, coordinator key or partition.
func entryName(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), true
	case reflect.Int32:
		return fmt.Sprint(v.Int()), true
	case reflect.Struct:
	default:
		return "", false
	}
	for _, f := range []string{"Topic", "Group", "ResourceName", "Key", "Partition"} {
		fv := v.FieldByName(f)
		if !fv.IsValid() {
			continue
		}
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		if n, ok := entryName(fv); ok && n != "" {
			return n, true
		}
	}
	return "", false
}

// flatCodes is every error code of resp by path of names ("t/0": topic t,
// partition 0; "": the top-level code when set).
func flatCodes(resp kmsg.Response) map[string]int16 {
	out := map[string]int16{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if c := v.FieldByName("ErrorCode"); c.IsValid() && (path != "" || c.Int() != 0) {
			out[path] = int16(c.Int())
		}
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() != reflect.Slice {
				continue
			}
			for j := range f.Len() {
				e := f.Index(j)
				n, ok := entryName(e)
				if !ok || e.Kind() != reflect.Struct {
					continue
				}
				p := n
				if path != "" {
					p = path + "/" + n
				}
				walk(e, p)
			}
		}
	}
	walk(reflect.ValueOf(resp).Elem(), "")
	return out
}

// listed is the names of the entries of req's top-level lists, in order.
func listed(req kmsg.Request) []string {
	var out []string
	v := reflect.ValueOf(req).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() == reflect.Uint8 {
			continue
		}
		for j := range f.Len() {
			if n, ok := entryName(f.Index(j)); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// brokerAnswer is what a broker answers to what is left of req: every
// entry with code 0, then the verdict's patches.
func brokerAnswer(req kmsg.Request, v *Verdict) kmsg.Response {
	resp := answer.ErrorResponse(req, 0)
	for _, p := range v.Patch {
		p(resp)
	}
	return resp
}
