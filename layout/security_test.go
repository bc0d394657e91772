package layout

import "testing"

func TestSCRAMKeyRoundTrip(t *testing.T) {
	l := New("/p")
	for _, user := range []string{"alice", "a/b", "with space", "100%", "ünï"} {
		k := l.SCRAMKey(user, "SCRAM-SHA-512")
		u, m, ok := l.ParseSCRAMKey(k)
		if !ok || u != user || m != "SCRAM-SHA-512" {
			t.Errorf("ParseSCRAMKey(%q) = %q, %q, %v; want %q", k, u, m, ok, user)
		}
	}
	for _, bad := range []string{"/p/security/scram/alice", "/p/security/scram//SCRAM-SHA-512", "/p/meta/x/y", "/p/security/scram/a/b/c"} {
		if _, _, ok := l.ParseSCRAMKey(bad); ok {
			t.Errorf("ParseSCRAMKey(%q) accepted", bad)
		}
	}
}
