package etcdmirror

import (
	"context"
	"fmt"
	"sync"
)

// View is the part every mirrored view shares: how far it is complete.
// A store embeds it, calls Advance from its Handler's Synced once the
// changes up to rev are applied, and so offers Synced and WaitRevision to
// its users. The zero value is not ready; use NewView.
//
// Its limit: it knows revisions only; what the view holds is the store's.
type View struct {
	mu     sync.Mutex
	rev    int64         // the view is complete up to rev
	moved  chan struct{} // closed (and replaced) when rev advances
	synced chan struct{} // closed at the first complete view
	once   sync.Once
}

// NewView returns a view complete up to no revision.
func NewView() *View {
	return &View{moved: make(chan struct{}), synced: make(chan struct{})}
}

// Advance records that the view holds every change up to rev (a Handler's
// Synced); an older rev changes nothing. The first call closes Synced.
func (v *View) Advance(rev int64) {
	v.mu.Lock()
	if rev > v.rev {
		v.rev = rev
		close(v.moved)
		v.moved = make(chan struct{})
	}
	v.mu.Unlock()
	v.once.Do(func() { close(v.synced) })
}

// Synced is closed once the view holds a complete listing.
func (v *View) Synced() <-chan struct{} { return v.synced }

// Revision is the revision the view is complete up to (0 before Synced).
func (v *View) Revision() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rev
}

// WaitRevision waits until the view holds every change up to rev (typically
// a write this replica just made, so that it acts on its own writes before
// it answers them), or ctx ends.
func (v *View) WaitRevision(ctx context.Context, rev int64) error {
	for {
		v.mu.Lock()
		cur, moved := v.rev, v.moved
		v.mu.Unlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return fmt.Errorf("view at revision %d, waiting for %d: %w", cur, rev, context.Cause(ctx))
		}
	}
}
