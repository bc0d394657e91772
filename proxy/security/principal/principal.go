// Package principal names who a client connection is, as Kafka does
// ("User:alice"). It promises only the value type: how a principal is
// established (TLS subject mapping, SASL) belongs to packages tlsconf and
// sasl; what it may do belongs to authorization.
package principal

// Principal is a Kafka principal: a type (always "User" here) and a name.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of a connection that did not authenticate
// (a PLAINTEXT listener, or TLS without a client certificate).
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// User returns the principal User:name.
func User(name string) Principal { return Principal{Type: "User", Name: name} }

// String is Kafka's form, "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// IsAnonymous reports whether p is User:ANONYMOUS.
func (p Principal) IsAnonymous() bool { return p == Anonymous }
