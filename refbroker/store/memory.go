package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is an ObjectStore in process memory, for tests and single-process
// development. It copies data in and out, so callers may reuse their buffers.
type Memory struct {
	now  func() time.Time
	mu   sync.RWMutex
	objs map[string]memObject
}

type memObject struct {
	data []byte
	mod  time.Time
}

// NewMemory returns an empty Memory store stamping objects with time.Now.
func NewMemory() *Memory { return NewMemoryWithClock(time.Now) }

// NewMemoryWithClock returns an empty Memory store stamping objects with now.
func NewMemoryWithClock(now func() time.Time) *Memory {
	return &Memory{now: now, objs: make(map[string]memObject)}
}

func (m *Memory) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("put %s: %w", key, ErrExists)
	}
	m.objs[key] = memObject{data: bytes.Clone(data), mod: m.now()}
	return nil
}

func (m *Memory) get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	return o.data, nil
}

func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := m.get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return bytes.Clone(data), nil
}

func (m *Memory) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	data, err := m.get(ctx, key)
	if err == nil {
		data, err = sliceRange(data, off, n)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s [%d,+%d): %w", key, off, n, err)
	}
	return bytes.Clone(data), nil
}

func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

func (m *Memory) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	m.mu.RLock()
	var out []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), Modified: o.mod})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
