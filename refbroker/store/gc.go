package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CollectGarbage deletes the objects under prefix that are older than grace
// and for which referenced returns false, and reports how many it deleted.
//
// grace protects objects written but not yet referenced: a broker writes a
// segment object first and commits the reference to it afterwards. grace must
// exceed the longest such gap plus the clock difference between writers and
// the store. An object whose commit was refused (fenced) stays unreferenced
// forever and is collected once grace has passed. referenced must answer from
// committed state read after the listing started, or a reference committed in
// between could be missed (grace covers that case too).
//
// It keeps going past failed deletes and returns them joined.
func CollectGarbage(ctx context.Context, s ObjectStore, prefix string, referenced func(key string) bool, grace time.Duration, now time.Time) (int, error) {
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("collect garbage under %q: %w", prefix, err)
	}
	deleted := 0
	var errs []error
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if now.Sub(o.Modified) < grace || referenced(o.Key) {
			continue
		}
		if err := s.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("collect garbage under %q: %w", prefix, err)
	}
	return deleted, nil
}
