package sasl

// Reauthenticating says whether a re-authentication (KIP-368) is between
// its steps: its SaslHandshake answered, its SaslAuthenticate not yet.
func (s *Session) Reauthenticating() bool {
	return s.authenticated && s.reauth && s.st == stAuthenticate
}
