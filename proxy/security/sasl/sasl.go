// Package sasl is the server side of Kafka's SASL authentication, behaving
// as a Kafka broker does: SaslHandshake (v0, then raw tokens; or v1, then
// SaslAuthenticate), the mechanisms SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and
// OAUTHBEARER, Kafka's error codes, and re-authentication (KIP-368).
//
// A Session is one connection's state machine; it decodes the SASL requests
// it is given and encodes their responses. Which requests may pass before
// authentication, framing and the failure delay belong to the connection
// (package proxy). Credentials are stored keys only (salt, iterations,
// StoredKey, ServerKey): a password is never stored or logged.
package sasl

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

// Mechanism names, as clients send them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	Plain       = "PLAIN"
	OAuthBearer = "OAUTHBEARER"
)

// Credentials looks up stored SCRAM credentials.
type Credentials interface {
	// SCRAM returns user's credential for a SCRAM mechanism.
	SCRAM(mechanism, user string) (scram.StoredCredentials, bool)
}

// TokenVerifier checks OAUTHBEARER tokens.
type TokenVerifier interface {
	// Verify returns the token's principal and expiry, or why it is not
	// acceptable (for the audit log, never for the client).
	Verify(token string) (principal.Principal, time.Time, error)
}

// Config configures an Authenticator.
type Config struct {
	// Mechanisms are the enabled mechanisms, in the order SaslHandshake
	// lists them (default SCRAM-SHA-512, SCRAM-SHA-256).
	Mechanisms  []string
	Credentials Credentials   // required for SCRAM and PLAIN
	Tokens      TokenVerifier // required for OAUTHBEARER
	// PlainWithoutTLS offers PLAIN on connections without TLS too; by
	// default PLAIN is offered only over TLS (it sends the password).
	PlainWithoutTLS bool
	// MaxSession is the longest a session lasts before the client must
	// re-authenticate (Kafka's connections.max.reauth.ms; 0: no limit
	// except an OAUTHBEARER token's expiry).
	MaxSession time.Duration
	// FailureDelay is how long a failed authentication waits before its
	// answer (Kafka's connection.failed.authentication.delay.ms; default
	// 100ms).
	FailureDelay time.Duration
	// StandInIterations and StandInSaltLen are the SCRAM parameters of the
	// stand-in credential answered for a user who does not exist: they
	// must be those real users are created with (credstore's defaults;
	// default DefaultIterations and DefaultSaltLen), or the first server
	// message tells which users exist.
	StandInIterations int
	StandInSaltLen    int
	// Secret keys the stand-in salts, derived from the user's name, so
	// that they are stable per name as real salts are. Replicas behind one
	// address must share it (default: random, per process).
	Secret []byte
	Now    func() time.Time // default time.Now
}

// The parameters real users' credentials are created with, which the
// stand-in credentials of unknown users copy.
const (
	DefaultIterations = 8192
	DefaultSaltLen    = 24
)

// Authenticator holds what every connection's Session shares.
type Authenticator struct {
	cfg    Config
	secret [32]byte // keys the stand-in credentials of unknown users (standin.go)
}

// New checks cfg.
func New(cfg Config) (*Authenticator, error) {
	if len(cfg.Mechanisms) == 0 {
		cfg.Mechanisms = []string{ScramSHA512, ScramSHA256}
	}
	for i, m := range cfg.Mechanisms {
		switch m {
		case ScramSHA256, ScramSHA512, Plain:
			if cfg.Credentials == nil {
				return nil, fmt.Errorf("sasl: %s needs a credential store", m)
			}
		case OAuthBearer:
			if cfg.Tokens == nil {
				return nil, errors.New("sasl: OAUTHBEARER needs a token verifier")
			}
		default:
			return nil, fmt.Errorf("sasl: unsupported mechanism %q", m)
		}
		if slices.Contains(cfg.Mechanisms[:i], m) {
			return nil, fmt.Errorf("sasl: mechanism %s listed twice", m)
		}
	}
	if cfg.FailureDelay <= 0 {
		cfg.FailureDelay = 100 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StandInIterations <= 0 {
		cfg.StandInIterations = DefaultIterations
	}
	if cfg.StandInSaltLen <= 0 {
		cfg.StandInSaltLen = DefaultSaltLen
	}
	if cfg.StandInSaltLen > 1024 {
		return nil, fmt.Errorf("sasl: stand-in salt length %d beyond 1024 bytes", cfg.StandInSaltLen)
	}
	a := &Authenticator{cfg: cfg}
	if len(cfg.Secret) > 0 {
		a.secret = sha256.Sum256(cfg.Secret)
	} else {
		rand.Read(a.secret[:]) // never fails (Go 1.24+)
	}
	return a, nil
}

// FailureDelay is how long a failure's answer waits.
func (a *Authenticator) FailureDelay() time.Duration { return a.cfg.FailureDelay }

// mechanisms lists what a connection is offered: PLAIN only over TLS
// unless allowed.
func (a *Authenticator) mechanisms(tls bool) []string {
	if tls || a.cfg.PlainWithoutTLS || !slices.Contains(a.cfg.Mechanisms, Plain) {
		return a.cfg.Mechanisms
	}
	return slices.DeleteFunc(slices.Clone(a.cfg.Mechanisms), func(m string) bool { return m == Plain })
}

// scramLookup is the credential lookup of a SCRAM conversation. An unknown
// user gets a stand-in credential that no proof matches, so that the
// exchange fails at its last step, as for a wrong password: the first
// answer does not tell whether a user exists.
func (a *Authenticator) scramLookup(mech string) scram.CredentialLookup {
	return func(user string) (scram.StoredCredentials, error) {
		if c, ok := a.cfg.Credentials.SCRAM(mech, user); ok {
			return c, nil
		}
		return a.standIn(mech, user)
	}
}

// standIn is an unknown user's credential: the iterations and salt length
// of real ones, a salt derived (HKDF-SHA-256, an HMAC construction) from
// the name and the secret, so stable per name, and keys no password
// matches.
func (a *Authenticator) standIn(mech, user string) (scram.StoredCredentials, error) {
	var err error
	derive := func(purpose string, n int) []byte {
		b, e := hkdf.Key(sha256.New, a.secret[:], nil, purpose+"\x00"+mech+"\x00"+user, n)
		err = errors.Join(err, e) // only beyond 255 hash lengths, which New rules out
		return b
	}
	keyLen := sha256.Size
	if mech == ScramSHA512 {
		keyLen = sha512.Size
	}
	c := scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(derive("salt", a.cfg.StandInSaltLen)), Iters: a.cfg.StandInIterations},
		StoredKey:  derive("stored", keyLen), ServerKey: derive("server", keyLen),
	}
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("sasl: stand-in credential: %w", err)
	}
	return c, nil
}
