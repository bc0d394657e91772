package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"

	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/proxy/security/principal"
)

// exchange is one authentication with one mechanism.
type exchange interface {
	// step takes the client's next message and returns the answer; done
	// means the client is authenticated. An error fails the exchange; its
	// text is for the audit log only.
	step(in []byte) (out []byte, done bool, err error)
	// result is who authenticated and until when (zero: no expiry of its
	// own), valid once step returned done.
	result() (principal.Principal, time.Time)
}

func (a *Authenticator) newExchange(mech string) (exchange, error) {
	switch mech {
	case ScramSHA256, ScramSHA512:
		gen := scram.SHA512
		if mech == ScramSHA256 {
			gen = scram.SHA256
		}
		srv, err := gen.NewServer(a.scramLookup(mech))
		if err != nil {
			return nil, fmt.Errorf("sasl: %s server: %w", mech, err)
		}
		h, _ := HashFor(mech)
		return &scramExchange{conv: srv.WithNonceGenerator(alphanumericNonce).NewConversation(), lookup: a.scramLookup(mech), hash: h}, nil
	case Plain:
		return &plainExchange{a: a}, nil
	case OAuthBearer:
		return &oauthExchange{v: a.cfg.Tokens}, nil
	}
	return nil, fmt.Errorf("sasl: unsupported mechanism %q", mech)
}

// alphanumericNonce is the server's part of the nonce: letters and
// digits, as Kafka's (rand.Text is 26 base32 characters).
func alphanumericNonce() string { return rand.Text() }

type scramExchange struct {
	conv   *scram.ServerConversation
	lookup scram.CredentialLookup
	hash   func() hash.Hash

	first, serverFirst string // the first round, for kafkaFinal
}

func (e *scramExchange) step(in []byte) ([]byte, bool, error) {
	if e.serverFirst != "" {
		if out, ok, err := e.kafkaFinal(string(in)); ok {
			return out, err == nil, err
		}
	}
	out, err := e.conv.Step(string(in))
	if err != nil {
		return nil, false, fmt.Errorf("scram: %w", err)
	}
	if !e.conv.Done() {
		e.first, e.serverFirst = string(in), out
		// The authorization id must be the user, as Kafka requires.
		if z := e.conv.AuthzID(); z != "" && z != e.conv.Username() {
			return nil, false, errors.New("scram: authorization id differs from the user")
		}
		return []byte(out), false, nil
	}
	if !e.conv.Valid() {
		return nil, false, errors.New("scram: invalid proof")
	}
	return []byte(out), true, nil
}

func (e *scramExchange) result() (principal.Principal, time.Time) {
	return principal.User(e.conv.Username()), time.Time{}
}

// kafkaFinal checks a client-final message whose nonce is the client's
// nonce followed by the whole server nonce. RFC 5802 wants the server
// nonce alone, and xdg-go/scram refuses anything else; librdkafka before
// 2.2 sends the longer one, and Kafka's broker accepts it (it checks that
// the nonce ends with the server's). ok is false for any other message,
// which the conversation then checks.
func (e *scramExchange) kafkaFinal(final string) (out []byte, ok bool, err error) {
	serverNonce, _, _ := strings.Cut(strings.TrimPrefix(e.serverFirst, "r="), ",")
	parts := strings.Split(final, ",")
	if len(parts) < 3 || !strings.HasPrefix(parts[1], "r=") {
		return nil, false, nil
	}
	nonce := parts[1][2:]
	if nonce == serverNonce || !strings.HasSuffix(nonce, serverNonce) {
		return nil, false, nil
	}
	proofField := parts[len(parts)-1]
	proof, perr := base64.StdEncoding.DecodeString(strings.TrimPrefix(proofField, "p="))
	if !strings.HasPrefix(proofField, "p=") || perr != nil {
		return nil, true, errors.New("scram: malformed proof")
	}
	gs2 := strings.SplitN(e.first, ",", 3)
	if len(gs2) != 3 {
		return nil, true, errors.New("scram: malformed first message")
	}
	bare := gs2[2] // client-first-message-bare
	cred, lerr := e.lookup(e.conv.Username())
	if lerr != nil {
		return nil, true, fmt.Errorf("scram: %w", lerr)
	}
	authMsg := bare + "," + e.serverFirst + "," + final[:strings.LastIndex(final, ",")]
	clientSig := mac(e.hash, cred.StoredKey, authMsg)
	if len(proof) != len(clientSig) {
		return nil, true, errors.New("scram: invalid proof")
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	h := e.hash()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), cred.StoredKey) {
		return nil, true, errors.New("scram: invalid proof")
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac(e.hash, cred.ServerKey, authMsg))), true, nil
}

// plainExchange checks a PLAIN password against the stored SCRAM
// credential: the password's StoredKey under the stored salt and
// iterations must be the stored one.
type plainExchange struct {
	a    *Authenticator
	user string
}

func (e *plainExchange) step(in []byte) ([]byte, bool, error) {
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return nil, false, errors.New("plain: malformed message")
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if authz != "" && authz != user {
		return nil, false, errors.New("plain: authorization id differs from the user")
	}
	// An unknown user pays the same key derivation against a stand-in
	// credential, and every comparison is constant-time, so that the
	// answer's timing does not tell whether the user exists.
	mech, known := ScramSHA512, false
	var c scram.StoredCredentials
	for _, m := range []string{ScramSHA512, ScramSHA256} {
		if c, known = e.a.cfg.Credentials.SCRAM(m, user); known {
			mech = m
			break
		}
	}
	if !known {
		var err error
		if c, err = e.a.standIn(mech, user); err != nil {
			return nil, false, err
		}
	}
	got, err := FromPassword(mech, pass, []byte(c.Salt), c.Iters)
	if err != nil {
		return nil, false, err
	}
	if subtle.ConstantTimeCompare(got.StoredKey, c.StoredKey) != 1 || !known {
		return nil, false, errors.New("plain: wrong password or unknown user")
	}
	e.user = user
	return nil, true, nil
}

func (e *plainExchange) result() (principal.Principal, time.Time) {
	return principal.User(e.user), time.Time{}
}

// oauthExchange reads RFC 7628's client initial response:
// gs2-header \x01 auth=Bearer <token> \x01 (key=value \x01)* \x01.
type oauthExchange struct {
	v      TokenVerifier
	p      principal.Principal
	expiry time.Time
}

func (e *oauthExchange) step(in []byte) ([]byte, bool, error) {
	gs2, rest, ok := strings.Cut(string(in), "\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") || !strings.HasSuffix(rest, "\x01") {
		return nil, false, errors.New("oauthbearer: malformed initial response")
	}
	authz := strings.TrimSuffix(strings.TrimPrefix(gs2, "n,"), ",")
	authz = strings.TrimPrefix(authz, "a=")
	var token string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01"), "\x01") {
		if v, ok := strings.CutPrefix(kv, "auth="); ok {
			scheme, tok, _ := strings.Cut(v, " ")
			if !strings.EqualFold(scheme, "Bearer") {
				return nil, false, errors.New("oauthbearer: auth is not a Bearer token")
			}
			token = strings.TrimSpace(tok)
		}
	}
	if token == "" {
		return nil, false, errors.New("oauthbearer: no token")
	}
	p, exp, err := e.v.Verify(token)
	if err != nil {
		return nil, false, fmt.Errorf("oauthbearer: %w", err)
	}
	if authz != "" && authz != p.Name {
		return nil, false, errors.New("oauthbearer: authorization id differs from the token's principal")
	}
	e.p, e.expiry = p, exp
	return nil, true, nil
}

func (e *oauthExchange) result() (principal.Principal, time.Time) { return e.p, e.expiry }
