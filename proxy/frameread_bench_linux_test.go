package proxy

// BenchmarkProduceFrameRead is the reader's side of a Produce at validation
// off and full, over a real loopback socket: what the proxy's connection
// reader does per frame (size, readArrived with the kernel's count, at full
// the frame's arrival (sums and record walks) and every batch checked from it) and nothing else, so
// that full's cost over off shows without the brokers' noise.

import (
	"bufio"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

func BenchmarkProduceFrameRead(b *testing.B) {
	for _, shape := range []struct {
		name           string
		parts, records int
	}{{"5x100", 5, 100}, {"5x16", 5, 16}, {"1x1000", 1, 1000}, {"6x1000", 6, 1000}} {
		for _, level := range []recordcheck.Level{recordcheck.Off, recordcheck.Full} {
			b.Run(shape.name+"/"+level.String(), func(b *testing.B) {
				benchFrameRead(b, level, shape.parts, shape.records)
			})
		}
	}
}

func benchFrameRead(b *testing.B, level recordcheck.Level, parts, records int) {
	frame, spans := produceFrame(b, parts, records)
	sized := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	sized = append(sized, frame...)
	check, err := recordcheck.New(recordcheck.Config{Level: level})
	if err != nil {
		b.Fatal(err)
	}
	defer check.Close()
	srv, cli := loopbackPair(b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the client: frames back to back until the reader closes
		defer wg.Done()
		for {
			if _, err := cli.Write(sized); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer cli.Close()
	defer srv.Close()

	runtime.LockOSThread() // the thread's CPU time is the reader's
	defer runtime.UnlockOSThread()
	br := bufio.NewReaderSize(srv, clientReadBufferBytes)
	queued := socketQueue(srv)
	var pool kwire.BufPool
	var arrivalPool sync.Pool
	arrival := frameArrival{pool: &arrivalPool}
	if level == recordcheck.Full {
		arrival.want = func(int16) bool { return true }
	}
	grant := func(total, _ int) (int, error) { return total, nil }
	lend := lender{limit: 1 << 40}
	b.SetBytes(int64(len(sized)))
	cpu0 := threadCPU(b)
	start := time.Now()
	for b.Loop() {
		n, err := kwire.ReadSize(br)
		if err != nil || int(n) != len(frame) {
			b.Fatalf("size %d, %v", n, err)
		}
		arrival.start()
		spare, lent := lend.forFrame(&pool)
		buf, err := readArrived(br, queued, &arrival, &pool, spare, int(n), grant)
		lent()
		if err != nil {
			b.Fatal(err)
		}
		a := arrival.bind(*buf)
		for _, sp := range spans {
			if r := check.CheckSummed(9, false, (*buf)[sp[0]:sp[1]], a); !r.OK() {
				b.Fatal(r)
			}
		}
		arrival.release()
		pool.Put(buf)
	}
	wall := time.Since(start)
	mb := float64(b.N) * float64(len(sized)) / 1e6
	b.ReportMetric(float64(threadCPU(b)-cpu0)/1e3/mb, "cpu-µs/MB")
	b.ReportMetric(float64(wall.Microseconds())/mb, "wall-µs/MB")
}

// threadCPU is the calling OS thread's user and system CPU time in ns.
func threadCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
