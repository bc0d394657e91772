package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// FS is an ObjectStore in a directory that several broker processes may share
// at once (a local disk for `kproxy dev`, or a network file system with POSIX
// link semantics). An object is written to a temporary file, fsynced, and then
// hard-linked to its final name: link(2) fails if the name exists, so exactly
// one concurrent writer wins and a reader never sees a partial object.
type FS struct {
	dir string
	tmp string
}

// NewFS opens (creating if needed) a store rooted at dir.
func NewFS(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("object store dir %s: %w", dir, err)
	}
	f := &FS{dir: abs, tmp: filepath.Join(abs, reservedDir)}
	if err := os.MkdirAll(f.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("object store dir %s: %w", abs, err)
	}
	return f, nil
}

// Dir is the root directory.
func (f *FS) Dir() string { return f.dir }

func (f *FS) path(key string) string { return filepath.Join(f.dir, filepath.FromSlash(key)) }

func (f *FS) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := f.put(ctx, key, data); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (f *FS) put(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	final := f.path(key)
	if _, err := os.Lstat(final); err == nil {
		return ErrExists // cheap early answer; the link below is the real check
	}
	tmp, err := f.writeTemp(data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	// A concurrent Delete may remove the parent directory between MkdirAll
	// and Link; a few rounds settle it.
	for range 5 {
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return fmt.Errorf("create directory: %w", err)
		}
		err = os.Link(tmp, final)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return ErrExists
	case err != nil:
		return fmt.Errorf("link into place: %w", err)
	}
	return syncDir(filepath.Dir(final))
}

func (f *FS) writeTemp(data []byte) (string, error) {
	t, err := os.CreateTemp(f.tmp, "put-*")
	if err != nil {
		return "", fmt.Errorf("create temporary file: %w", err)
	}
	_, werr := t.Write(data)
	serr := t.Sync()
	cerr := t.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(t.Name())
		return "", fmt.Errorf("write temporary file: %w", err)
	}
	return t.Name(), nil
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

func (f *FS) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := f.read(ctx, key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return data, nil
}

func (f *FS) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("get %s [%d,+%d): %w", key, off, n, ErrInvalidRange)
	}
	data, err := f.read(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("get %s [%d,+%d): %w", key, off, n, err)
	}
	return data, nil
}

// read returns n bytes from off (n < 0: to the end).
func (f *FS) read(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	file, err := os.Open(f.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, ErrNotFound
	}
	size := st.Size()
	if off < 0 || off > size {
		return nil, fmt.Errorf("%w: offset %d of %d bytes", ErrInvalidRange, off, size)
	}
	if n < 0 || off+n > size {
		n = size - off
	}
	buf := make([]byte, n)
	if _, err := file.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// Delete removes key and then any directories it leaves empty.
func (f *FS) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	p := f.path(key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	// Best effort: os.Remove refuses non-empty directories.
	for dir := filepath.Dir(p); dir != f.dir && strings.HasPrefix(dir, f.dir); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func (f *FS) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	// Walk only the deepest directory the prefix names.
	root := f.dir
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		root = f.path(prefix[:i])
	}
	var out []ObjectInfo
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // the prefix's directory, or one deleted while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == f.tmp {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(f.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walking
		} else if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// CleanTemp removes temporary files older than age, left by writers that
// crashed between writing and linking. Only call it with an age well above
// the longest write, since other processes may be writing right now.
func (f *FS) CleanTemp(age time.Duration, now time.Time) (int, error) {
	entries, err := os.ReadDir(f.tmp)
	if err != nil {
		return 0, fmt.Errorf("clean temporary files: %w", err)
	}
	removed := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < age {
			continue
		}
		if os.Remove(filepath.Join(f.tmp, e.Name())) == nil {
			removed++
		}
	}
	return removed, nil
}
