package store_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kproxy/kproxy/refbroker/store"
)

// counting counts reads that reach the inner store.
type counting struct {
	store.ObjectStore
	gets, ranges atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.ObjectStore.Get(ctx, key)
}

func (c *counting) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.ranges.Add(1)
	return c.ObjectStore.GetRange(ctx, key, off, n)
}

// lookups is a store.CacheObserver.
type lookups struct{ hits, misses atomic.Int64 }

func (l *lookups) CacheLookup(hit bool) {
	if hit {
		l.hits.Add(1)
	} else {
		l.misses.Add(1)
	}
}

func TestCachedServesFromCache(t *testing.T) {
	inner := &counting{ObjectStore: store.NewMemory()}
	obs := &lookups{}
	s := store.NewCached(inner, 100, obs)
	mustPut(t, s, "written", "by-this-process")
	if err := inner.PutIfAbsent(ctx(t), "elsewhere", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, err := s.Get(ctx(t), "elsewhere"); err != nil || string(got) != "0123456789" {
			t.Fatalf("get = %q, %v", got, err)
		}
		if got, err := s.GetRange(ctx(t), "elsewhere", 2, 3); err != nil || string(got) != "234" {
			t.Fatalf("get range = %q, %v", got, err)
		}
		if got, err := s.Get(ctx(t), "written"); err != nil || string(got) != "by-this-process" {
			t.Fatalf("get own write = %q, %v", got, err)
		}
	}
	if g, r := inner.gets.Load(), inner.ranges.Load(); g != 1 || r != 0 {
		t.Fatalf("inner store read %d times whole, %d by range; want 1 and 0", g, r)
	}
	st := s.(*store.Cached).Stats()
	if st.Objects != 2 || st.Bytes != 25 || st.Misses != 1 {
		t.Fatalf("stats = %+v; want 2 objects, 25 bytes, 1 miss", st)
	}
	if h, m := obs.hits.Load(), obs.misses.Load(); h != st.Hits || m != st.Misses || h != 8 {
		t.Fatalf("observer saw %d hits and %d misses; stats say %d and %d, want 8 hits", h, m, st.Hits, st.Misses)
	}
}

func TestCachedBoundedInBytes(t *testing.T) {
	inner := &counting{ObjectStore: store.NewMemory()}
	s := store.NewCached(inner, 30, nil)
	for _, k := range []string{"a", "b", "c", "d"} {
		mustPut(t, s, k, strings.Repeat(k, 10)) // 40 bytes written, 30 cacheable
	}
	mustPut(t, s, "huge", strings.Repeat("h", 31))
	st := s.(*store.Cached).Stats()
	if st.Bytes > 30 || st.Objects != 3 {
		t.Fatalf("stats = %+v; want at most 30 bytes in 3 objects", st)
	}
	if _, err := s.Get(ctx(t), "a"); err != nil { // the oldest was evicted
		t.Fatal(err)
	}
	if _, err := s.Get(ctx(t), "huge"); err != nil { // never cached
		t.Fatal(err)
	}
	if got := inner.gets.Load(); got != 2 {
		t.Fatalf("inner gets = %d, want 2 (evicted a, uncacheable huge)", got)
	}
}

func TestCachedDoesNotCacheLosingWrite(t *testing.T) {
	inner := store.NewMemory()
	s := store.NewCached(inner, 1<<10, nil)
	if err := inner.PutIfAbsent(ctx(t), "k", []byte("winner")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx(t), "k", []byte("loser")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("put = %v, want ErrExists", err)
	}
	if got, _ := s.Get(ctx(t), "k"); string(got) != "winner" {
		t.Fatalf("cache serves %q, want the stored winner", got)
	}
	if err := s.Delete(ctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx(t), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete = %v; the cache must forget deleted keys", err)
	}
}

func TestCachedDisabled(t *testing.T) {
	inner := store.NewMemory()
	if s := store.NewCached(inner, 0, nil); s != store.ObjectStore(inner) {
		t.Fatal("maxBytes 0 should return the inner store")
	}
}
