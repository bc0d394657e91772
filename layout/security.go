package layout

import (
	"net/url"
	"strings"
)

// Security keys live under SecurityPrefix, outside MetaPrefix: they change
// when an administrator changes them, and every proxy watches them.

// SecurityPrefix covers every security key (credentials; later ACLs).
func (l Layout) SecurityPrefix() string { return l.prefix + "/security/" }

// SCRAMPrefix covers the SCRAM credentials of every user.
func (l Layout) SCRAMPrefix() string { return l.SecurityPrefix() + "scram/" }

// SCRAMKey holds the SCRAMCredential of user for a mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512). The user is path-escaped, so any name
// makes one key segment.
func (l Layout) SCRAMKey(user, mechanism string) string {
	return l.SCRAMPrefix() + url.PathEscape(user) + "/" + mechanism
}

// ParseSCRAMKey returns the user and mechanism of a SCRAMKey.
func (l Layout) ParseSCRAMKey(key string) (user, mechanism string, ok bool) {
	rest, ok := strings.CutPrefix(key, l.SCRAMPrefix())
	if !ok {
		return "", "", false
	}
	esc, mechanism, ok := strings.Cut(rest, "/")
	if !ok || mechanism == "" || strings.Contains(mechanism, "/") {
		return "", "", false
	}
	user, err := url.PathUnescape(esc)
	if err != nil || user == "" {
		return "", "", false
	}
	return user, mechanism, true
}

// SCRAMCredential is a stored SCRAM credential (RFC 5802): never the
// password, only what verifies it.
type SCRAMCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}
