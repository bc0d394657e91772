package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cached is a read cache in front of another ObjectStore, bounded in bytes.
// Caching is safe because objects are immutable: a key is never rewritten
// with different content (segment names are unique). Objects this process
// writes are cached at once, since the newest segments are the ones
// consumers read next.
//
// Get and GetRange return slices shared with the cache: callers must not
// modify them.
type Cached struct {
	inner ObjectStore
	max   int64

	mu   sync.Mutex
	lru  *simplelru.LRU[string, []byte]
	size int64

	hits, misses atomic.Int64
	obs          CacheObserver // nil: none
}

// CacheObserver is told of every lookup (a broker's metrics).
type CacheObserver interface {
	CacheLookup(hit bool)
}

// CacheStats counts cache use since NewCached.
type CacheStats struct {
	Hits, Misses int64
	Bytes        int64 // currently cached
	Objects      int
}

// NewCached wraps inner with a cache of at most maxBytes, telling obs (nil:
// nobody) of each lookup. maxBytes <= 0 returns inner unchanged. Objects
// larger than maxBytes are not cached.
func NewCached(inner ObjectStore, maxBytes int64, obs CacheObserver) ObjectStore {
	if maxBytes <= 0 {
		return inner
	}
	c := &Cached{inner: inner, max: maxBytes, obs: obs}
	// The entry count is unbounded; add evicts by bytes. NewLRU fails only
	// for a size <= 0.
	c.lru, _ = simplelru.NewLRU(math.MaxInt, func(_ string, v []byte) { c.size -= int64(len(v)) })
	return c
}

// Stats reports cache use.
func (c *Cached) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.size, Objects: c.lru.Len()}
}

func (c *Cached) lookup(key string) ([]byte, bool) {
	c.mu.Lock()
	v, ok := c.lru.Get(key)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	if c.obs != nil {
		c.obs.CacheLookup(ok)
	}
	return v, ok
}

// add caches data, which the caller must not modify afterwards.
func (c *Cached) add(key string, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) {
		return
	}
	c.lru.Add(key, data)
	c.size += int64(len(data))
	for c.size > c.max {
		c.lru.RemoveOldest()
	}
}

func (c *Cached) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := c.inner.PutIfAbsent(ctx, key, data); err != nil {
		return err // on ErrExists the stored object may differ from data: do not cache
	}
	c.add(key, bytes.Clone(data))
	return nil
}

func (c *Cached) Get(ctx context.Context, key string) ([]byte, error) {
	if v, ok := c.lookup(key); ok {
		return v, nil
	}
	data, err := c.inner.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c.add(key, data)
	return data, nil
}

// GetRange serves from a cached whole object, else reads the range from the
// inner store without caching it.
func (c *Cached) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if v, ok := c.lookup(key); ok {
		r, err := sliceRange(v, off, n)
		if err != nil {
			return nil, fmt.Errorf("get %s [%d,+%d) from cache: %w", key, off, n, err)
		}
		return r, nil
	}
	return c.inner.GetRange(ctx, key, off, n)
}

func (c *Cached) Delete(ctx context.Context, key string) error {
	err := c.inner.Delete(ctx, key)
	c.mu.Lock()
	c.lru.Remove(key)
	c.mu.Unlock()
	return err
}

func (c *Cached) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return c.inner.List(ctx, prefix)
}
