package proxy

import (
	"encoding/binary"
	"fmt"
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

// BenchmarkLargeFrame measures reading large frames (a produce of 1 MiB or
// 8 MiB) through the budget over loopback, one at a time: the frame buffer
// grows as the bytes arrive.
func BenchmarkLargeFrame(b *testing.B) {
	for _, size := range []int{1 << 20, 8 << 20} {
		b.Run(fmt.Sprint(size>>20, "MiB"), func(b *testing.B) {
			ts := startServer(b, Config{Logger: slog.New(slog.DiscardHandler)}, newFakeDispatcher(false))
			c := dial(b, ts)
			id := "test"
			frame := kwire.AppendRequestHeader(nil, 3, 4, 0, &id, false)
			frame = append(frame, make([]byte, size)...)
			kwire.FinishFrame(frame)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				binary.BigEndian.PutUint32(frame[kwire.CorrOffset:], uint32(i))
				c.raw(frame)
				if corr, _ := c.read(); corr != int32(i) {
					b.Fatalf("got %d, want %d", corr, i)
				}
			}
		})
	}
}
