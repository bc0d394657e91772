package tlsconf

import (
	"strings"
	"testing"
)

func TestMapperRules(t *testing.T) {
	for _, tc := range []struct {
		rules, dn, want string
		ok              bool
	}{
		{"", "CN=alice,OU=eng,O=Acme", "CN=alice,OU=eng,O=Acme", true},
		{"DEFAULT", "CN=alice", "CN=alice", true},
		{`RULE:^CN=([^,]+),.*$/$1/`, "CN=alice,OU=eng", "alice", true},
		{`RULE:^CN=([^,]+),.*$/$1/U`, "CN=alice,OU=eng", "ALICE", true},
		{`RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L, DEFAULT`, "CN=Bob,OU=Ops", "bob@ops", true},
		{`RULE:^CN=(.*?),OU=ServiceUsers$/$1/,DEFAULT`, "CN=x,OU=Other", "CN=x,OU=Other", true},
		{`RULE:^CN=(.*?),OU=ServiceUsers$/$1/`, "CN=x,OU=Other", "", false},
		{`RULE:^O=a\/b$/slash/`, "O=a/b", "slash", true},
	} {
		m, err := ParseRules(tc.rules)
		if err != nil {
			t.Fatalf("ParseRules(%q): %v", tc.rules, err)
		}
		got, ok := m.Name(tc.dn)
		if got != tc.want || ok != tc.ok {
			t.Errorf("rules %q on %q = %q, %v; want %q, %v", tc.rules, tc.dn, got, ok, tc.want, tc.ok)
		}
	}
	for _, bad := range []string{"RULE:abc", "RULE:a/b", "NOPE", "DEFAULT DEFAULT", `RULE:(/x/`} {
		if _, err := ParseRules(bad); err == nil || !strings.Contains(err.Error(), "principal mapping rule") {
			t.Errorf("ParseRules(%q) = %v, want a principal mapping rule error", bad, err)
		}
	}
}
