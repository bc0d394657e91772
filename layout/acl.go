package layout

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL keys live outside MetaPrefix: they change when an administrator
// changes them, and every proxy watches them. One key per binding, named
// by every field of the binding, so that creating a binding twice writes
// the same key (Kafka keeps no duplicates) and deleting one is one delete.

// ACLPrefix covers every ACL binding.
func (l Layout) ACLPrefix() string { return l.prefix + "/security/acls/" }

// ACL is the value of an ACLKey, Kafka's ACL binding with Kafka's names for
// its enums ("TOPIC", "PREFIXED", "WRITE", "ALLOW").
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Name         string                      `json:"name"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// ACLKey is the key of a binding:
// <prefix>/security/acls/<TYPE>/<PATTERN>/<name>/<principal>/<host>/<OPERATION>/<PERMISSION>,
// the name, principal and host path-escaped so that each is one segment.
func (l Layout) ACLKey(a ACL) string {
	return l.ACLPrefix() + strings.Join([]string{
		a.ResourceType.String(), a.PatternType.String(), url.PathEscape(a.Name),
		url.PathEscape(a.Principal), url.PathEscape(a.Host), a.Operation.String(), a.Permission.String(),
	}, "/")
}

// DecodeACL reads an ACL key's value and checks that it is the binding the
// key names, so that a hand-written key cannot say one thing and do another.
func (l Layout) DecodeACL(key string, value []byte) (ACL, error) {
	var a ACL
	if !strings.HasPrefix(key, l.ACLPrefix()) {
		return a, fmt.Errorf("acl key %q outside %s", key, l.ACLPrefix())
	}
	if err := Unmarshal(value, &a); err != nil {
		return a, fmt.Errorf("acl key %q: %w", key, err)
	}
	if want := l.ACLKey(a); want != key {
		return a, fmt.Errorf("acl key %q holds the binding of key %q", key, want)
	}
	return a, nil
}
