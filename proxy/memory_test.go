package proxy

import (
	"log/slog"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestIdleConnectionMemory measures what an idle client connection costs
// after it served one request (its reader and writer goroutines, buffers and
// sequencer), client side included; the target is 64 KiB.
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens hundreds of connections")
	}
	const conns = 400
	// Discard logs: the test log buffer would count as connection memory.
	ts := startServer(t, Config{Logger: slog.New(slog.DiscardHandler)}, newFakeDispatcher(false))
	inUse := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	before := inUse()
	clients := make([]*testClient, conns)
	for i := range clients {
		clients[i] = dial(t, ts)
		clients[i].send(3, 4, 1, nil)
		clients[i].read()
	}
	waitFor(t, func() bool { return testutil.ToFloat64(ts.m.conns) == conns }, "all connections accepted")
	per := (int64(inUse()) - int64(before)) / conns
	t.Logf("%d idle connections: %d bytes each (race detector: %v)", conns, per, raceEnabled)
	if !raceEnabled && per > 64<<10 {
		t.Fatalf("an idle connection costs %d bytes, target 64 KiB", per)
	}
	runtime.KeepAlive(clients)
}
