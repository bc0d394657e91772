package pacer

import (
	"context"
	"testing"
	"time"
)

// TestTakeFull: with every slot held, Take refuses once the wait passes and
// counts it by kind, or at once without counting when the caller's context
// has ended (a gone client is not a refusal); a released slot is taken again.
func TestTakeFull(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ctxDone    bool
		wantCounts int
	}{
		{"wait passes", false, 1},
		{"caller gone", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refused []Kind
			p := New(Config{Max: 1, Wait: 50 * time.Millisecond, Refused: func(k Kind) { refused = append(refused, k) }})
			if !p.Take(context.Background(), Partition) {
				t.Fatal("free slot refused")
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctxDone {
				cancel()
			}
			defer cancel()
			start := time.Now()
			if p.Take(ctx, Group) {
				t.Fatal("Take succeeded with every slot held")
			}
			if took := time.Since(start); !tc.ctxDone && took < 50*time.Millisecond {
				t.Fatalf("refused after %v; want after the 50ms wait", took)
			}
			if len(refused) != tc.wantCounts || (tc.wantCounts == 1 && refused[0] != Group) {
				t.Fatalf("refusals counted = %v; want %d of kind group", refused, tc.wantCounts)
			}
			p.Release()
			if !p.Take(context.Background(), Group) {
				t.Fatal("released slot refused")
			}
		})
	}
}
