package layout

import "testing"

func TestQuotaEntityKeys(t *testing.T) {
	l := New("")
	n := func(s string) *QuotaEntityName { return &QuotaEntityName{Name: s} }
	d := &QuotaEntityName{Default: true}
	cases := []struct {
		e   QuotaEntity
		key string
	}{
		{QuotaEntity{User: n("alice")}, "/kproxy/quota/entities/users/alice"},
		{QuotaEntity{User: d, Client: n("a/b")}, "/kproxy/quota/entities/users/<default>/clients/a%2Fb"},
		{QuotaEntity{Client: d}, "/kproxy/quota/entities/clients/<default>"},
		{QuotaEntity{User: n("<default>")}, "/kproxy/quota/entities/users/%3Cdefault%3E"},
	}
	for _, tc := range cases {
		if got := l.QuotaEntityKey(tc.e); got != tc.key {
			t.Errorf("key of %+v: %q, want %q", tc.e, got, tc.key)
		}
		back, ok := l.ParseQuotaEntityKey(tc.key)
		if !ok || l.QuotaEntityKey(back) != tc.key {
			t.Errorf("parse %q: %+v %v", tc.key, back, ok)
		}
	}
	for _, bad := range []string{
		"/kproxy/quota/entities/", "/kproxy/quota/entities/users", "/kproxy/quota/entities/clients/a/users/b",
		"/kproxy/quota/entities/users/a/users/b", "/kproxy/quota/replicas/x", "/kproxy/quota/entities/users/%zz",
	} {
		if e, ok := l.ParseQuotaEntityKey(bad); ok {
			t.Errorf("parsed %q as %+v", bad, e)
		}
	}
}
