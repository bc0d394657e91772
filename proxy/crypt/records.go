package crypt

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// This file rewrites the records inside a decompressed batch (Kafka's
// record format v2: a varint length, attributes, timestamp and offset
// deltas, key, value, headers) one at a time, encrypting or decrypting each
// value. The records are walked and checked by recordcheck.Records, the
// proxy's one record decoder.

// record is one record, its fields aliasing the batch it is in.
type record struct {
	head     []byte // attributes, deltas, key length and key: kept as they are
	value    []byte // nil when null
	nheaders int
	headers  []byte // the headers after their count
	size     int    // bytes of the record, its length varint included
}

// fromWalk is the record w that recordcheck found in data. The boundaries
// come from the spans the walk found, not from re-encoded lengths, so a
// producer's longer-than-needed varints are kept exactly.
func fromWalk(data []byte, w *recordcheck.Record) record {
	_, k := binary.Varint(data[w.Start:w.End]) // the record's length
	headEnd := w.Key.Off + max(w.Key.Len, 0)
	r := record{head: data[w.Start+k : headEnd], nheaders: int(w.NumHeaders), size: w.End - w.Start}
	if w.Value.Len >= 0 {
		r.value = data[w.Value.Off : w.Value.Off+w.Value.Len : w.Value.Off+w.Value.Len]
	}
	_, hk := binary.Varint(data[w.Headers:w.End]) // the header count
	r.headers = data[w.Headers+hk : w.End]
	return r
}

// bytesField reads a varint-length byte field at p (length -1: null).
func bytesField(b []byte, p int) ([]byte, int, error) {
	if p >= len(b) {
		return nil, 0, fmt.Errorf("%w: record truncated", ErrFormat)
	}
	l, n := binary.Varint(b[p:])
	if n <= 0 || l < -1 || int64(len(b)-p-n) < l {
		return nil, 0, fmt.Errorf("%w: field length", ErrFormat)
	}
	p += n
	if l < 0 {
		return nil, p, nil
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), nil
}

// ourHeader finds HeaderKey among r's headers: the byte range of the whole
// header (key and value) within r.headers, and its value. found is false
// when the record has none.
func (r record) ourHeader() (start, end int, value []byte, found bool, err error) {
	p := 0
	for range r.nheaders {
		s := p
		var k, v []byte
		if k, p, err = bytesField(r.headers, p); err != nil {
			return 0, 0, nil, false, err
		}
		if v, p, err = bytesField(r.headers, p); err != nil {
			return 0, 0, nil, false, err
		}
		if !found && k != nil && string(k) == HeaderKey {
			start, end, value, found = s, p, v, true
		}
	}
	if p != len(r.headers) {
		return 0, 0, nil, false, fmt.Errorf("%w: %d bytes after the headers", ErrFormat, len(r.headers)-p)
	}
	return start, end, value, found, nil
}

// sealer encrypts the values of one batch under one DEK.
type sealer struct {
	aead    cipher.AEAD
	wrapped []byte
	nonces  []byte // NonceSize random bytes per record still to seal
}

// appendSealed appends r with its value sealed and a HeaderKey header
// added; a null value (a tombstone) is copied as it is.
func (s *sealer) appendSealed(dst, raw []byte, r record) ([]byte, error) {
	if r.value == nil {
		return append(dst, raw[:r.size]...), nil
	}
	if _, _, _, found, err := r.ourHeader(); err != nil || found {
		if err == nil {
			err = fmt.Errorf("%w: the producer set the reserved header %s", ErrFormat, HeaderKey)
		}
		return nil, err
	}
	if len(s.nonces) < NonceSize {
		return nil, fmt.Errorf("%w: more records than the batch claims", ErrFormat)
	}
	nonce := s.nonces[:NonceSize]
	s.nonces = s.nonces[NonceSize:]
	sealedLen := len(r.value) + TagSize
	hl := headerLen(len(s.wrapped))
	ours := varintLen(int64(len(HeaderKey))) + len(HeaderKey) + varintLen(int64(hl)) + hl
	body := len(r.head) + varintLen(int64(sealedLen)) + sealedLen + varintLen(int64(r.nheaders+1)) + len(r.headers) + ours
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.head...)
	dst = binary.AppendVarint(dst, int64(sealedLen))
	dst = seal(dst, s.aead, nonce, r.value)
	dst = binary.AppendVarint(dst, int64(r.nheaders+1))
	dst = append(dst, r.headers...)
	dst = binary.AppendVarint(dst, int64(len(HeaderKey)))
	dst = append(dst, HeaderKey...)
	dst = binary.AppendVarint(dst, int64(hl))
	return appendHeader(dst, s.wrapped, nonce), nil
}

// keyFunc returns the AEAD of a wrapped DEK (asking the KMS if unseen).
type keyFunc func(wrapped []byte) (cipher.AEAD, error)

// opener decrypts the values of one batch, remembering the last DEK it
// used: a batch's records almost always share one.
type opener struct {
	key     keyFunc
	wrapped []byte
	aead    cipher.AEAD
}

// appendOpened appends r with its value decrypted and its HeaderKey header
// removed; a record without one is copied as it is (opened false).
func (o *opener) appendOpened(dst, raw []byte, r record) (_ []byte, opened bool, err error) {
	start, end, hv, found, err := r.ourHeader()
	if err != nil || !found {
		return append(dst, raw[:r.size]...), false, err
	}
	env, err := parseHeader(hv)
	if err != nil {
		return nil, false, err
	}
	if r.value == nil {
		return nil, false, fmt.Errorf("%w: null value with a %s header", ErrFormat, HeaderKey)
	}
	if o.aead == nil || !bytes.Equal(o.wrapped, env.wrapped) {
		if o.aead, err = o.key(env.wrapped); err != nil {
			o.aead = nil
			return nil, false, err
		}
		o.wrapped = env.wrapped
	}
	plainLen := len(r.value) - TagSize
	if plainLen < 0 {
		return nil, false, fmt.Errorf("%w: value of %d bytes", ErrFormat, len(r.value))
	}
	body := len(r.head) + varintLen(int64(plainLen)) + plainLen + varintLen(int64(r.nheaders-1)) + len(r.headers) - (end - start)
	dst = binary.AppendVarint(dst, int64(body))
	dst = append(dst, r.head...)
	dst = binary.AppendVarint(dst, int64(plainLen))
	if dst, err = open(dst, o.aead, env.nonce, r.value); err != nil {
		return nil, false, err
	}
	dst = binary.AppendVarint(dst, int64(r.nheaders-1))
	dst = append(dst, r.headers[:start]...)
	return append(dst, r.headers[end:]...), true, nil
}
