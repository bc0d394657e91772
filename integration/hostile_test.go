package integration

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/hostile"
)

// TestHostileClients runs `kproxy dev` under hostile traffic (issue 12:
// bad frames of every kind, huge claims, slow writers and idle connections)
// while a producer writes: the producer sees no error, memory stays
// bounded and the log gets a few lines, not one per bad frame.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a dev cluster under load")
	}
	bin := buildKproxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := hostile.Measure(ctx, hostile.MeasureConfig{
		Binary: bin, Dir: t.TempDir(), Duration: 5 * time.Second,
		Traffic: hostile.Config{Attackers: 16, Idle: 300, Seed: 12},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.ProduceErr != nil || rep.Acked != rep.Produced || rep.Produced < 20 {
		t.Errorf("producer: %d of %d acknowledged, first error %v", rep.Acked, rep.Produced, rep.ProduceErr)
	}
	// Before the fix, frames were allocated at their claimed size: 16
	// attackers claiming 100 MiB took the process past a GiB.
	if grew := rep.RSSPeak - rep.RSSBefore; grew > 256<<20 {
		t.Errorf("resident memory grew %d MiB (from %d MiB)", grew>>20, rep.RSSBefore>>20)
	}
	// One line per reason per 10s interval: five reasons, and a little room
	// for lines that are not about bad input.
	if rep.WarnLines > 15 {
		t.Errorf("%d WARN lines in %v of hostile traffic", rep.WarnLines, 5*time.Second)
	}
	if rep.BadInput < 50 || rep.Traffic.IdleOpened != 300 {
		t.Errorf("the traffic did not arrive: %v bad inputs counted, %d idle connections", rep.BadInput, rep.Traffic.IdleOpened)
	}
}
