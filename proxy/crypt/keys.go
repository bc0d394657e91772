package crypt

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// This file keeps the data keys (DEKs). Each KEK has one current DEK that
// encrypts, replaced once it is RefreshAfter old or has done
// MaxEncryptions; if the KMS cannot give a new one, the old one serves
// until ExpireAfter, and then encryption fails (ErrUnavailable) rather than
// write plaintext. Every DEK this proxy made or unwrapped sits in an LRU
// keyed by its wrapped bytes, so a record costs a KMS call only when its
// wrapped DEK is unseen. A wrapped DEK the KMS refused is not asked about
// again for RefusedFor (a consumer retrying a bad record would otherwise
// turn each fetch into a KMS call).

var (
	// ErrUnavailable is a KMS that did not answer (or answered with a
	// fault of its own): retriable.
	ErrUnavailable = errors.New("crypt: KMS unavailable")
	// ErrKeyRefused is a KMS that refused: an unknown or disabled key, no
	// permission, or a wrapped DEK it did not make.
	ErrKeyRefused = errors.New("crypt: KMS refused the key")
)

// KMS is what the proxy asks of a key management service. Errors wrap
// ErrKeyRefused when the KMS answered no, and ErrUnavailable otherwise.
type KMS interface {
	// GenerateDataKey returns a new 256-bit key and its wrapping under kek.
	GenerateDataKey(ctx context.Context, kek string) (plain, wrapped []byte, err error)
	// Decrypt unwraps what GenerateDataKey wrapped.
	Decrypt(ctx context.Context, wrapped []byte) (plain []byte, err error)
}

// Limits bound how a DEK is used; zero fields take Kroxylicious' defaults.
type Limits struct {
	RefreshAfter   time.Duration // [1h] a DEK this old is replaced when the KMS can
	ExpireAfter    time.Duration // [2h] a DEK this old never encrypts again
	MaxEncryptions int64         // [5,000,000] records one DEK may encrypt
	CacheSize      int           // [1000] DEKs kept for decryption
	RefusedFor     time.Duration // [1m] a refused wrapped DEK is not asked about again
	RetryAfter     time.Duration // [5s] a failed DEK generation is not tried again
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.RefreshAfter, time.Hour)
	def(&l.ExpireAfter, 2*time.Hour)
	def(&l.RefusedFor, time.Minute)
	def(&l.RetryAfter, 5*time.Second)
	if l.MaxEncryptions <= 0 {
		l.MaxEncryptions = 5_000_000
	}
	if l.CacheSize <= 0 {
		l.CacheSize = 1000
	}
	return l
}

// dek is one KEK's current data key.
type dek struct {
	aead    cipher.AEAD
	wrapped []byte
	born    time.Time
	used    int64 // records encrypted; guarded by keys.mu
}

// keyState is a KEK's current DEK and its last failed replacement.
type keyState struct {
	cur    *dek
	failed time.Time
	err    error
}

type keys struct {
	lim   Limits
	now   func() time.Time
	calls func(op, result string) // counts KMS calls

	mu      sync.Mutex
	byKEK   map[string]*keyState
	gen     singleflight.Group // by KEK: one GenerateDataKey at a time
	unwrap  singleflight.Group // by wrapped DEK
	cache   *lru.Cache[string, cipher.AEAD]
	refused *lru.Cache[string, time.Time]
}

func newKeys(lim Limits, now func() time.Time, calls func(op, result string)) *keys {
	lim = lim.withDefaults()
	cache, _ := lru.New[string, cipher.AEAD](lim.CacheSize) // only a size <= 0 fails
	refused, _ := lru.New[string, time.Time](lim.CacheSize)
	return &keys{lim: lim, now: now, calls: calls, byKEK: map[string]*keyState{}, cache: cache, refused: refused}
}

// sealerFor reserves n encryptions under kek's current DEK, making a new
// DEK when there is none that may do them. waiting, if not nil, is called
// once before it waits for the KMS (its own call or another's), to let go
// of what the caller should not hold that long.
func (k *keys) sealerFor(ctx context.Context, kms KMS, kek string, n int, waiting func()) (*dek, error) {
	if int64(n) > k.lim.MaxEncryptions {
		return nil, fmt.Errorf("crypt: a batch of %d records exceeds the %d encryptions of one DEK", n, k.lim.MaxEncryptions)
	}
	for range 3 { // other batches may use up a new DEK first
		d, fresh, err := k.take(kek, n)
		if d != nil && fresh {
			return d, nil
		}
		if err != nil { // a recent failure: use the old DEK if it may
			if d != nil {
				return d, nil
			}
			return nil, err
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		_, err, _ = k.gen.Do(kek, func() (any, error) {
			// Detached: one client going away must not fail the others waiting.
			return nil, k.generate(context.WithoutCancel(ctx), kms, kek)
		})
		if err != nil {
			if d, _, _ := k.take(kek, n); d != nil {
				return d, nil // the KMS failed: the old DEK serves until it expires
			}
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: DEKs for %s used up faster than they are made", ErrUnavailable, kek)
}

// take reserves n encryptions under kek's current DEK. fresh is whether
// it is younger than RefreshAfter; d is nil when none may do them (too
// old, or used up). err is the last failed generation, if it is recent.
func (k *keys) take(kek string, n int) (d *dek, fresh bool, err error) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.byKEK[kek]
	if st == nil {
		return nil, false, nil
	}
	if st.err != nil && now.Sub(st.failed) < k.lim.RetryAfter {
		err = st.err
	}
	c := st.cur
	if c == nil || c.used+int64(n) > k.lim.MaxEncryptions || now.Sub(c.born) >= k.lim.ExpireAfter {
		return nil, false, err
	}
	fresh = now.Sub(c.born) < k.lim.RefreshAfter
	if !fresh && err == nil {
		return nil, false, nil // ask for a new one first
	}
	c.used += int64(n)
	return c, fresh, err
}

// generate makes kek's new current DEK.
func (k *keys) generate(ctx context.Context, kms KMS, kek string) error {
	plain, wrapped, err := kms.GenerateDataKey(ctx, kek)
	k.count("generate", err)
	var aead cipher.AEAD
	if err == nil {
		aead, err = newAEAD(plain)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.byKEK[kek]
	if st == nil {
		st = &keyState{}
		k.byKEK[kek] = st
	}
	if err != nil {
		st.failed, st.err = k.now(), fmt.Errorf("crypt: new DEK under %s: %w", kek, err)
		return st.err
	}
	st.cur, st.err = &dek{aead: aead, wrapped: wrapped, born: k.now()}, nil
	k.cache.Add(string(wrapped), aead) // this replica reads its own records without the KMS
	return nil
}

// opener returns the AEAD of a wrapped DEK, unwrapping it with the KMS if
// it is not cached.
func (k *keys) opener(ctx context.Context, kms KMS, wrapped []byte) (cipher.AEAD, error) {
	if a, ok := k.cache.Get(string(wrapped)); ok {
		return a, nil
	}
	if t, ok := k.refused.Get(string(wrapped)); ok && k.now().Sub(t) < k.lim.RefusedFor {
		return nil, fmt.Errorf("%w (refused %s ago)", ErrKeyRefused, k.now().Sub(t).Round(time.Second))
	}
	w := string(wrapped)
	v, err, _ := k.unwrap.Do(w, func() (any, error) {
		if a, ok := k.cache.Get(w); ok {
			return a, nil
		}
		plain, err := kms.Decrypt(context.WithoutCancel(ctx), wrapped) // see sealerFor
		k.count("decrypt", err)
		if err != nil {
			if errors.Is(err, ErrKeyRefused) {
				k.refused.Add(w, k.now())
			}
			return nil, fmt.Errorf("crypt: unwrap DEK: %w", err)
		}
		a, err := newAEAD(plain)
		if err != nil {
			k.refused.Add(w, k.now())
			return nil, fmt.Errorf("%w: unwrapped DEK: %w", ErrKeyRefused, err)
		}
		k.cache.Add(w, a)
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(cipher.AEAD), nil
}

func (k *keys) count(op string, err error) {
	switch {
	case err == nil:
		k.calls(op, "ok")
	case errors.Is(err, ErrKeyRefused):
		k.calls(op, "refused")
	default:
		k.calls(op, "unavailable")
	}
}

// newAEAD is AES-256-GCM under key, which it clears.
func newAEAD(key []byte) (cipher.AEAD, error) {
	defer clear(key)
	if len(key) != 32 {
		return nil, fmt.Errorf("crypt: DEK of %d bytes, want 32", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("crypt: AES: %w", err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("crypt: GCM: %w", err)
	}
	return a, nil
}
