package proxy

import (
	"encoding/binary"
	"log/slog"
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
)

// BenchmarkPipelined measures the proxy's own per-request cost (framing,
// sequencing, metrics; the dispatcher answers at once) with windows of 32
// requests written at once on one connection over loopback.
func BenchmarkPipelined(b *testing.B) {
	const window = 32
	ts := startServer(b, Config{Logger: slog.New(slog.DiscardHandler)}, newFakeDispatcher(false))
	c := dial(b, ts)
	id := "test"
	frame := kwire.AppendRequestHeader(nil, 3, 4, 0, &id, false) // Metadata v4
	frame = append(frame, make([]byte, 100)...)
	kwire.FinishFrame(frame)
	burst := make([]byte, 0, window*len(frame))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(window, b.N-done)
		burst = burst[:0]
		for i := range n {
			binary.BigEndian.PutUint32(frame[kwire.CorrOffset:], uint32(done+i))
			burst = append(burst, frame...)
		}
		c.raw(burst)
		for i := range n {
			if corr, _ := c.read(); corr != int32(done+i) {
				b.Fatalf("got %d, want %d", corr, done+i)
			}
		}
		done += n
	}
}
