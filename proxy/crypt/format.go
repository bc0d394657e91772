package crypt

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
)

// The record format (docs/encryption.md): an encrypted record carries a
// header named HeaderKey whose value is
//
//	version   1 byte (FormatVersion)
//	wrapped   uvarint length, then the DEK as the KMS wrapped it
//	nonce     NonceSize bytes
//
// and its value is the AES-256-GCM sealing of the plaintext value under
// that DEK and nonce (ciphertext, then the 16-byte tag), with the version
// byte as additional data. Key, timestamps and the other headers stay as
// the producer sent them. A record without the header is plaintext
// (written before its topic was encrypted, or a tombstone): the header, not
// a value prefix, tells the two apart, so no plaintext value can be misread
// as ciphertext. Every record carries its wrapped DEK, so any replica with
// access to the KMS can decrypt it alone, even after compaction removed the
// other records of its batch.
const (
	HeaderKey     = "kproxy.enc"
	FormatVersion = 1
	NonceSize     = 12
	TagSize       = 16
)

var (
	// ErrFormat is a kproxy.enc header or ciphertext that cannot be read.
	ErrFormat = errors.New("crypt: malformed encrypted record")
	// ErrAuth is a record whose ciphertext fails authentication under its
	// DEK: tampered with, or not written by kproxy.
	ErrAuth = errors.New("crypt: record fails authentication")
)

// envelope is a parsed HeaderKey value; its slices alias the record.
type envelope struct {
	wrapped []byte
	nonce   []byte
}

// headerLen is the size of a HeaderKey value for a wrapped DEK of n bytes.
func headerLen(n int) int { return 1 + uvarintLen(uint64(n)) + n + NonceSize }

// appendHeader appends the HeaderKey value for wrapped and nonce.
func appendHeader(dst, wrapped, nonce []byte) []byte {
	dst = append(dst, FormatVersion)
	dst = binary.AppendUvarint(dst, uint64(len(wrapped)))
	dst = append(dst, wrapped...)
	return append(dst, nonce...)
}

// parseHeader reads a HeaderKey value.
func parseHeader(v []byte) (envelope, error) {
	if len(v) == 0 {
		return envelope{}, fmt.Errorf("%w: empty %s header", ErrFormat, HeaderKey)
	}
	if v[0] != FormatVersion {
		return envelope{}, fmt.Errorf("%w: format version %d (this proxy reads %d)", ErrFormat, v[0], FormatVersion)
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n == 0 || n > uint64(len(v)) {
		return envelope{}, fmt.Errorf("%w: wrapped key length", ErrFormat)
	}
	rest := v[1+k:]
	if uint64(len(rest)) != n+NonceSize {
		return envelope{}, fmt.Errorf("%w: header of %d bytes", ErrFormat, len(v))
	}
	return envelope{wrapped: rest[:n], nonce: rest[n:]}, nil
}

// aad is the additional data of every sealed value: the format version, so
// that a value cannot be read under another version's rules.
var aad = []byte{FormatVersion}

// seal appends the sealed value of plain to dst.
func seal(dst []byte, aead cipher.AEAD, nonce, plain []byte) []byte {
	return aead.Seal(dst, nonce, plain, aad)
}

// open appends the plaintext of sealed to dst.
func open(dst []byte, aead cipher.AEAD, nonce, sealed []byte) ([]byte, error) {
	if len(sealed) < TagSize {
		return nil, fmt.Errorf("%w: value of %d bytes", ErrFormat, len(sealed))
	}
	out, err := aead.Open(dst, nonce, sealed, aad)
	if err != nil {
		return nil, ErrAuth
	}
	return out, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// varintLen is the size of v as a zigzag varint (Kafka's record fields).
func varintLen(v int64) int { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }
