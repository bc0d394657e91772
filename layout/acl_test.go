package layout

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestACLKeyRoundTrip(t *testing.T) {
	l := New("")
	a := ACL{
		ResourceType: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypePrefixed, Name: "a-/odd name",
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationWrite, Permission: kmsg.ACLPermissionTypeAllow,
	}
	key := l.ACLKey(a)
	if !strings.HasPrefix(key, "/kproxy/security/acls/TOPIC/PREFIXED/a-%2Fodd%20name/") || !strings.HasSuffix(key, "/WRITE/ALLOW") {
		t.Fatalf("key %q", key)
	}
	val := Marshal(a)
	if !strings.Contains(val, `"operation":"WRITE"`) || !strings.Contains(val, `"pattern_type":"PREFIXED"`) {
		t.Fatalf("value %s does not use Kafka's names", val)
	}
	got, err := l.DecodeACL(key, []byte(val))
	if err != nil || got != a {
		t.Fatalf("DecodeACL = %+v, %v; want %+v", got, err, a)
	}
	other := a
	other.Permission = kmsg.ACLPermissionTypeDeny
	if _, err := l.DecodeACL(key, []byte(Marshal(other))); err == nil {
		t.Fatal("a value naming another binding was accepted")
	}
	if _, err := l.DecodeACL(key, []byte("{")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}
