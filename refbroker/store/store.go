// Package store is the object store stub brokers keep segments in: a flat
// namespace of immutable objects with create-only writes, like S3 with
// If-None-Match: *.
//
// The promise: PutIfAbsent is atomic (exactly one of any number of concurrent
// writers of a key wins, across processes for FS) and an object, once
// written, never changes until deleted. Create-only does not fence a stale
// writer by itself; what makes an object part of a log is the fenced commit of
// a reference to it (see lease). Objects nothing references are
// removed by CollectGarbage after a grace period.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ObjectStore is the storage interface brokers use.
type ObjectStore interface {
	// PutIfAbsent writes key unless it exists (then ErrExists, and the
	// existing object is unchanged). The store keeps its own copy of data.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Get returns the whole object or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetRange returns up to n bytes from offset off: fewer at the end of the
	// object, none when off equals the size, ErrInvalidRange beyond it or for
	// negative arguments.
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Delete removes key; an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time
}

var (
	ErrExists       = errors.New("store: object exists")
	ErrNotFound     = errors.New("store: object not found")
	ErrInvalidKey   = errors.New("store: invalid key")
	ErrInvalidRange = errors.New("store: invalid range")
)

// reservedDir holds FS temporary files; no key may start with it.
const reservedDir = ".kproxy-tmp"

// CheckKey rejects keys that are empty, absolute, contain empty, "." or ".."
// segments, backslashes or NUL bytes, or use the reserved top directory.
// Every store applies the same rule so that code tested on Memory works on FS.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for i, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || (i == 0 && seg == reservedDir) {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// checkPrefix accepts "" and any prefix of a valid key.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.HasPrefix(prefix, "/") || strings.ContainsAny(prefix, "\\\x00") {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
		}
	}
	return nil
}

// sliceRange applies GetRange's rules to a whole object.
func sliceRange(data []byte, off, n int64) ([]byte, error) {
	size := int64(len(data))
	if off < 0 || n < 0 || off > size {
		return nil, fmt.Errorf("%w: offset %d length %d of %d bytes", ErrInvalidRange, off, n, size)
	}
	return data[off:min(size, off+n)], nil
}
