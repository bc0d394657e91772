package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/refbroker/store"
)

// impls are the stores every conformance test runs against.
func impls() []struct {
	name string
	open func(t *testing.T) store.ObjectStore
} {
	return []struct {
		name string
		open func(t *testing.T) store.ObjectStore
	}{
		{"fs", func(t *testing.T) store.ObjectStore { return mustFS(t, t.TempDir()) }},
		{"memory", func(*testing.T) store.ObjectStore { return store.NewMemory() }},
		{"cached-memory", func(*testing.T) store.ObjectStore { return store.NewCached(store.NewMemory(), 1<<20, nil) }},
		{"cached-fs", func(t *testing.T) store.ObjectStore { return store.NewCached(mustFS(t, t.TempDir()), 1<<20, nil) }},
		// A cache too small for most test objects still has to behave.
		{"cached-tiny", func(*testing.T) store.ObjectStore { return store.NewCached(store.NewMemory(), 8, nil) }},
	}
}

func mustFS(t *testing.T, dir string) *store.FS {
	t.Helper()
	f, err := store.NewFS(dir)
	if err != nil {
		t.Fatalf("NewFS(%s): %v", dir, err)
	}
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustPut(t *testing.T, s store.ObjectStore, key, data string) {
	t.Helper()
	if err := s.PutIfAbsent(ctx(t), key, []byte(data)); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.ObjectStore)
	}{
		{"put get", testPutGet},
		{"put existing keeps the first", testPutExisting},
		{"caller may reuse its buffer", testBufferReuse},
		{"missing", testMissing},
		{"get range", testGetRange},
		{"delete", testDelete},
		{"list", testList},
		{"invalid keys", testInvalidKeys},
		{"concurrent put, one winner", testConcurrentPut},
		{"garbage collection", testCollectGarbage},
	}
	for _, impl := range impls() {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, impl.open(t)) })
			}
		})
	}
}

func testPutGet(t *testing.T, s store.ObjectStore) {
	for _, key := range []string{"a", "seg/demo/3/00000000000000000000-x.seg", "deep/er/and/deeper/k"} {
		mustPut(t, s, key, "data:"+key)
		got, err := s.Get(ctx(t), key)
		if err != nil || string(got) != "data:"+key {
			t.Errorf("get %s = %q, %v", key, got, err)
		}
	}
	mustPut(t, s, "empty", "")
	if got, err := s.Get(ctx(t), "empty"); err != nil || len(got) != 0 {
		t.Errorf("get empty object = %q, %v", got, err)
	}
}

func testPutExisting(t *testing.T, s store.ObjectStore) {
	mustPut(t, s, "k", "first")
	if err := s.PutIfAbsent(ctx(t), "k", []byte("second")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second put = %v, want ErrExists", err)
	}
	if got, _ := s.Get(ctx(t), "k"); string(got) != "first" {
		t.Fatalf("after refused put, object = %q, want first", got)
	}
}

func testBufferReuse(t *testing.T, s store.ObjectStore) {
	buf := []byte("original")
	if err := s.PutIfAbsent(ctx(t), "k", buf); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXX")
	if got, _ := s.Get(ctx(t), "k"); string(got) != "original" {
		t.Fatalf("object changed with the caller's buffer: %q", got)
	}
}

func testMissing(t *testing.T, s store.ObjectStore) {
	if _, err := s.Get(ctx(t), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx(t), "nope", 0, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get range missing = %v, want ErrNotFound", err)
	}
	mustPut(t, s, "dir/k", "x")
	if _, err := s.Get(ctx(t), "dir"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get of a key prefix = %v, want ErrNotFound", err)
	}
}

func testGetRange(t *testing.T, s store.ObjectStore) {
	mustPut(t, s, "r", "0123456789")
	// Read it once so cached stores serve ranges from the cache too.
	if _, err := s.Get(ctx(t), "r"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		off, n  int64
		want    string
		wantErr error
	}{
		{0, 10, "0123456789", nil},
		{2, 3, "234", nil},
		{7, 100, "789", nil},
		{10, 5, "", nil},
		{3, 0, "", nil},
		{11, 1, "", store.ErrInvalidRange},
		{-1, 2, "", store.ErrInvalidRange},
		{0, -1, "", store.ErrInvalidRange},
	}
	for _, tc := range tests {
		got, err := s.GetRange(ctx(t), "r", tc.off, tc.n)
		if !errors.Is(err, tc.wantErr) || (err == nil && string(got) != tc.want) {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q, %v", tc.off, tc.n, got, err, tc.want, tc.wantErr)
		}
	}
}

func testDelete(t *testing.T, s store.ObjectStore) {
	mustPut(t, s, "d/k", "x")
	mustPut(t, s, "d/other", "y")
	for range 2 { // the second delete is of an absent key
		if err := s.Delete(ctx(t), "d/k"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, err := s.Get(ctx(t), "d/k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete = %v, want ErrNotFound", err)
	}
	if got, err := s.Get(ctx(t), "d/other"); err != nil || string(got) != "y" {
		t.Fatalf("sibling after delete = %q, %v", got, err)
	}
	mustPut(t, s, "d/k", "again")
	if got, _ := s.Get(ctx(t), "d/k"); string(got) != "again" {
		t.Fatalf("re-put after delete = %q", got)
	}
}

func testList(t *testing.T, s store.ObjectStore) {
	keys := []string{"seg/a/1", "seg/a/2", "seg/a-b/1", "seg/ab", "seg/b/1", "other/1", "segx"}
	for _, k := range keys {
		mustPut(t, s, k, k)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"other/1", "seg/a-b/1", "seg/a/1", "seg/a/2", "seg/ab", "seg/b/1", "segx"}},
		{"seg/", []string{"seg/a-b/1", "seg/a/1", "seg/a/2", "seg/ab", "seg/b/1"}},
		{"seg/a", []string{"seg/a-b/1", "seg/a/1", "seg/a/2", "seg/ab"}},
		{"seg/a/", []string{"seg/a/1", "seg/a/2"}},
		{"seg", []string{"seg/a-b/1", "seg/a/1", "seg/a/2", "seg/ab", "seg/b/1", "segx"}},
		{"nothing/", nil},
		{"seg/a/2", []string{"seg/a/2"}},
	}
	for _, tc := range tests {
		infos, err := s.List(ctx(t), tc.prefix)
		if err != nil {
			t.Fatalf("list %q: %v", tc.prefix, err)
		}
		var got []string
		for _, in := range infos {
			got = append(got, in.Key)
			if in.Size != int64(len(in.Key)) || in.Modified.IsZero() {
				t.Errorf("list %q: %s has size %d modified %v", tc.prefix, in.Key, in.Size, in.Modified)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("list %q = %v, want %v", tc.prefix, got, tc.want)
		}
	}
}

func testInvalidKeys(t *testing.T, s store.ObjectStore) {
	for _, key := range []string{"", "/abs", "../up", "a/../../b", "a//b", "a/./b", "a/", ".kproxy-tmp/x", "a\\b", "nul\x00"} {
		if err := s.PutIfAbsent(ctx(t), key, []byte("x")); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("put %q = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctx(t), key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("get %q = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx(t), key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("delete %q = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"../", "/abs", "a/../"} {
		if _, err := s.List(ctx(t), prefix); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("list %q = %v, want ErrInvalidKey", prefix, err)
		}
	}
}

func testConcurrentPut(t *testing.T, s store.ObjectStore) {
	const writers, keys = 16, 8
	winners := make([][]int, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for k := range keys {
				err := s.PutIfAbsent(ctx(t), fmt.Sprintf("race/%d", k), []byte(fmt.Sprintf("writer-%d", w)))
				switch {
				case err == nil:
					mu.Lock()
					winners[k] = append(winners[k], w)
					mu.Unlock()
				case !errors.Is(err, store.ErrExists):
					t.Errorf("writer %d key %d: %v", w, k, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for k, ws := range winners {
		if len(ws) != 1 {
			t.Errorf("key %d: %d winners %v, want exactly 1", k, len(ws), ws)
			continue
		}
		got, err := s.Get(ctx(t), fmt.Sprintf("race/%d", k))
		if want := fmt.Sprintf("writer-%d", ws[0]); err != nil || !bytes.Equal(got, []byte(want)) {
			t.Errorf("key %d holds %q, %v; the winner wrote %q", k, got, err, want)
		}
	}
}

func testCollectGarbage(t *testing.T, s store.ObjectStore) {
	for _, k := range []string{"seg/live", "seg/dead", "seg/fresh-dead", "keep/other"} {
		mustPut(t, s, k, "x")
	}
	referenced := func(key string) bool { return key == "seg/live" }
	// Nothing is older than an hour yet.
	if n, err := store.CollectGarbage(ctx(t), s, "seg/", referenced, time.Hour, time.Now()); err != nil || n != 0 {
		t.Fatalf("collect within grace: deleted %d, %v; want 0", n, err)
	}
	later := time.Now().Add(2 * time.Hour)
	n, err := store.CollectGarbage(ctx(t), s, "seg/", referenced, time.Hour, later)
	if err != nil || n != 2 {
		t.Fatalf("collect after grace: deleted %d, %v; want 2", n, err)
	}
	for key, want := range map[string]bool{"seg/live": true, "seg/dead": false, "seg/fresh-dead": false, "keep/other": true} {
		_, err := s.Get(ctx(t), key)
		if got := err == nil; got != want {
			t.Errorf("%s present = %v, want %v (err %v)", key, got, want, err)
		}
	}
}
