package upstream

import (
	"context"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
)

const mib = 1 << 20

// rawReply answers r with a frame of n zero bytes after its correlation id
// (a zero tag count when flexible): the pool forwards bodies undecoded.
func rawReply(r *received, n int) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+n))
	frame = binary.BigEndian.AppendUint32(frame, uint32(r.corr))
	frame = append(frame, make([]byte, n)...)
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.nc.Write(frame) //nolint:errcheck // the pool may be gone
}

// heapAfterGC is the live heap once the frame pool dropped what it keeps
// and two collections emptied the sync.Pools.
func heapAfterGC(bufs *kwire.BufPool) uint64 {
	bufs.Trim()
	bufs.Trim()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func checkHeap(t *testing.T, what string, start uint64, bufs *kwire.BufPool) {
	t.Helper()
	heap := heapAfterGC(bufs)
	t.Logf("%s: heap after GC %.1f MiB, %.1f MiB at the start", what, float64(heap)/mib, float64(start)/mib)
	if heap > start+16*mib {
		t.Fatalf("%s: heap after GC grew from %.1f to %.1f MiB", what, float64(start)/mib, float64(heap)/mib)
	}
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * testWait) // a loaded machine is slow to end them, never wrong
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after %s, %d at the start:\n%s", runtime.NumGoroutine(), 3*testWait, n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDroppedAnswersNotPinned: forty requests written in one batch are
// answered with 1 MiB each, and their callers drop the answers without
// Release (as when the client connection is gone). While the connection
// stays open the answers are garbage: the writer keeps no reference to the
// batch it wrote (before the fix its batch slice pinned all forty).
func TestDroppedAnswersNotPinned(t *testing.T) {
	bufs := new(kwire.BufPool)
	start := heapAfterGC(bufs)
	hold := make(chan struct{})
	fb := newFakeBrokerHolding(t, hold)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1, Bufs: bufs}, res)
	learnShape(t, p, fb, hold)
	const n = 40
	pend := make([]Pending, n)
	for i := range pend { // queued behind the held handshake: one batch
		pend[i] = send(t, p, 1, 0, 12, "t")
	}
	hold <- struct{}{}
	for range n {
		rawReply(recv(t, fb), mib)
	}
	for _, pd := range pend {
		if _, err := wait(t, pd); err != nil {
			t.Fatalf("answer: %v", err)
		}
	}
	clear(pend) // dropped, never released
	checkHeap(t, "forty 1 MiB answers dropped, connection open", start, bufs)
}

// TestBrokerFailureFreesMemory: a broker that stops reading (in-order, with
// a small receive buffer, holding its first request) and one that closes in
// the middle of an answer: every request fails or is answered, and once the
// pool is closed the heap after GC and the goroutines are back where they
// started.
func TestBrokerFailureFreesMemory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broker func(t testing.TB) *fakeBroker
		serve  func(t *testing.T, fb *fakeBroker, n int)
	}{
		{"stops reading", newStallingFakeBroker, func(t *testing.T, fb *fakeBroker, _ int) {
			recv(t, fb) // held unanswered: the broker reads nothing more
		}},
		{"closes mid-answer", newFakeBroker, func(t *testing.T, fb *fakeBroker, n int) {
			for i := range n {
				r := recv(t, fb)
				if i < n-1 {
					rawReply(r, mib)
					continue
				}
				frame := binary.BigEndian.AppendUint32(nil, uint32(4+mib))
				frame = binary.BigEndian.AppendUint32(frame, uint32(r.corr))
				r.w.nc.Write(append(frame, make([]byte, mib/2)...)) //nolint:errcheck
				r.w.nc.Close()
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bufs := new(kwire.BufPool)
			goroutines := runtime.NumGoroutine()
			start := heapAfterGC(bufs)
			fb := tc.broker(t)
			res := &resolver{}
			res.set(1, fb.addr())
			// ReadTimeout too: at times the stalled broker's kernel takes
			// all 16 MiB, so that no write times out and only the answer's
			// deadline sees the stall (its 30s default outlasted the wait).
			p, _ := newTestPool(t, Config{ConnsPerBroker: 1, Bufs: bufs, WriteTimeout: 300 * time.Millisecond, ReadTimeout: 2 * time.Second}, res)
			const n = 16
			pend := make([]Pending, n)
			for i := range pend { // 1 MiB each: more than the stalled broker's buffers take
				pr, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(append(metadataReq(12, "t"), make([]byte, mib)...))})
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				pend[i] = pr
			}
			tc.serve(t, fb, n)
			failed := 0
			// A bounded wait longer than wait's: on a loaded machine the
			// stalled connection's failure took over 5s in 2 of ~25 runs.
			wctx, cancel := context.WithTimeout(context.Background(), 6*testWait)
			defer cancel()
			for _, pd := range pend {
				_, err := pd.Wait(wctx)
				if wctx.Err() != nil {
					t.Fatalf("a request neither answered nor failed within %s", 6*testWait)
				}
				if err != nil {
					failed++
				}
			}
			if failed == 0 {
				t.Fatal("no request failed: the broker's failure was not seen")
			}
			clear(pend)
			p.Close()
			fb.close()
			waitGoroutines(t, goroutines)
			checkHeap(t, tc.name, start, bufs)
		})
	}
}
