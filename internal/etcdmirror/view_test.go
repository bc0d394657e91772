package etcdmirror_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdmirror"
)

func TestViewWaitRevision(t *testing.T) {
	v := etcdmirror.NewView()
	select {
	case <-v.Synced():
		t.Fatal("Synced closed before any Advance")
	default:
	}
	done := make(chan error, 1)
	go func() { done <- v.WaitRevision(context.Background(), 7) }()

	v.Advance(5) // not yet far enough
	select {
	case <-v.Synced():
	default:
		t.Fatal("Synced not closed after the first Advance")
	}
	select {
	case err := <-done:
		t.Fatalf("WaitRevision(7) returned %v at revision 5", err)
	default:
	}
	v.Advance(3) // older: ignored
	if got := v.Revision(); got != 5 {
		t.Fatalf("Revision after Advance(3) = %d, want 5", got)
	}
	v.Advance(9)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitRevision(7) at revision 9: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitRevision(7) still waiting at revision 9")
	}
	if err := v.WaitRevision(context.Background(), 9); err != nil {
		t.Fatalf("WaitRevision of the current revision: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := v.WaitRevision(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRevision past the view with a canceled context = %v, want context.Canceled", err)
	}
}
