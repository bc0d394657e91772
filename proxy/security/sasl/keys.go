package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"
)

// HashFor returns the hash of a SCRAM mechanism.
func HashFor(mechanism string) (func() hash.Hash, error) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, nil
	case ScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("sasl: %q is not a SCRAM mechanism", mechanism)
}

// FromSaltedPassword computes the stored credential of RFC 5802 from
// SaltedPassword (what AlterUserScramCredentials carries).
func FromSaltedPassword(mechanism string, salt []byte, iterations int, salted []byte) (scram.StoredCredentials, error) {
	h, err := HashFor(mechanism)
	if err != nil {
		return scram.StoredCredentials{}, err
	}
	clientKey := mac(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: iterations},
		StoredKey:  stored.Sum(nil),
		ServerKey:  mac(h, salted, "Server Key"),
	}, nil
}

// FromPassword derives the stored credential of a password with the given
// salt and iteration count (the password is used as its UTF-8 bytes, as
// Kafka does).
func FromPassword(mechanism, password string, salt []byte, iterations int) (scram.StoredCredentials, error) {
	h, err := HashFor(mechanism)
	if err != nil {
		return scram.StoredCredentials{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("sasl: derive key: %w", err)
	}
	return FromSaltedPassword(mechanism, salt, iterations, salted)
}

func mac(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
