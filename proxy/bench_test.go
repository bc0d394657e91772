package proxy

import (
	"encoding/binary"
	"log/slog"
	"testing"
)

// BenchmarkPipelined measures the proxy's own per-request cost (framing,
// sequencing, metrics; the dispatcher answers at once) with windows of 32
// requests written at once on one connection over loopback.
func BenchmarkPipelined(b *testing.B) {
	const window = 32
	ts := startServer(b, Config{Logger: slog.New(slog.DiscardHandler)}, newFakeDispatcher(false))
	c := dial(b, ts)
	frame := []byte{0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0, 4, 't', 'e', 's', 't'}
	frame = append(frame, make([]byte, 100)...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	burst := make([]byte, 0, window*len(frame))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(window, b.N-done)
		burst = burst[:0]
		for i := range n {
			binary.BigEndian.PutUint32(frame[8:], uint32(done+i))
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
