package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
)

// arrivingSource is a socket as readArrived sees it: data arrives in steps
// of step bytes (each Read delivers at most what arrived, then the next
// step arrives), and queued tells what arrived and was not read yet.
type arrivingSource struct {
	data    []byte
	step    int // bytes that arrive after each read (0: all at once)
	arrived int
	read    int
	reads   int
	asks    int // calls of queued
}

func (s *arrivingSource) Read(p []byte) (int, error) {
	s.reads++
	if s.read == len(s.data) {
		return 0, io.EOF
	}
	k := copy(p, s.data[s.read:s.arrived])
	s.read += k
	s.arrived = min(len(s.data), s.arrived+s.step)
	return k, nil
}

func (s *arrivingSource) queued() int { s.asks++; return s.arrived - s.read }

// countingPool counts what is taken from and given back to the pool, and
// checks the capacity of each buffer taken.
type countingPool struct {
	kwire.BufPool
	gets, puts int
	check      func(capacity int)
}

func (p *countingPool) Get(n int) *[]byte {
	p.gets++
	b := p.BufPool.Get(n)
	if p.check != nil {
		p.check(cap(*b))
	}
	return b
}
func (p *countingPool) Put(b *[]byte) { p.puts++; p.BufPool.Put(b) }

// TestReadArrived: a frame the kernel already holds is reserved whole and
// read into one buffer in one call; one arriving in pieces is never
// reserved beyond what arrived plus a chunk; without the kernel's count the
// reservations step by chunks as before; a frame lent a spare buffer is
// read into it with no other buffer taken, and the spare asked for once;
// failures give every buffer back.
func TestReadArrived(t *testing.T) {
	const chunk = kwire.ReadChunkBytes
	const mib = 1 << 20
	tests := []struct {
		name      string
		n         int // the frame's length
		size      int // the frame's bytes in the source; more are the next frame's
		first     int // bytes arrived before the read starts
		step      int
		noQueue   bool
		reserveAt int // reserve fails once asked for this much (0: never)
		tight     int // reserve takes only least when asked for more than this (0: never)
		spares    int // free buffers of the frame's size, lent when asked
		wantErr   error
		// wants, when > 0
		maxReserves, maxGets, maxReads int
		noAsk                          bool // the kernel's count never asked
	}{
		{name: "held by the kernel", n: mib, size: mib + 100, first: mib + 100, maxReserves: 1, maxGets: 1, maxReads: 2},
		{name: "arriving in pieces", n: mib, size: mib, first: 10 << 10, step: 100 << 10},
		{name: "arriving in pieces, past a size class", n: mib + 1000, size: mib + 1000, first: 300 << 10, step: 300 << 10},
		{name: "budget tight", n: mib, size: mib, first: mib, tight: 3 * chunk, maxReserves: mib / chunk},
		{name: "kernel count unknown", n: mib, size: mib, first: mib, noQueue: true, maxReserves: mib / chunk},
		{name: "reserve refused", n: mib, size: mib, first: mib / 4, step: 10 << 10, reserveAt: mib / 2, wantErr: errRefusedForTest},
		{name: "ends early", n: mib, size: mib / 2, first: 1 << 10, step: 50 << 10, wantErr: io.ErrUnexpectedEOF},
		{name: "within a chunk of what arrived", n: 40 << 10, size: 40 << 10, first: 3 << 10, step: 10 << 10, noAsk: true},
		{name: "arriving in pieces, a spare lent", n: mib, size: mib, first: 10 << 10, step: 100 << 10, spares: 2, maxGets: -1},
		{name: "spare lent, ends early", n: mib, size: mib / 2, first: 1 << 10, step: 50 << 10, spares: 1, wantErr: io.ErrUnexpectedEOF},
		{name: "spare lent, reserve refused", n: mib, size: mib, first: mib / 4, step: 10 << 10, reserveAt: mib / 2, spares: 1, wantErr: errRefusedForTest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte(i * 7)
			}
			src := &arrivingSource{data: data, step: tc.step, arrived: tc.first}
			br := bufio.NewReaderSize(src, clientReadBufferBytes)
			pool := &countingPool{}
			var queued func() int
			if !tc.noQueue {
				queued = src.queued
			}
			reserves, reserved := 0, 0
			pool.check = func(capacity int) { // kwire's bound: the buffer at most twice the reservation
				if capacity > 2*reserved {
					t.Fatalf("took a buffer of %d bytes with %d reserved", capacity, reserved)
				}
			}
			reserve := func(total, least int) (int, error) {
				reserves++
				if least > total || least <= reserved {
					t.Fatalf("asked for %d, at least %d, holding %d", total, least, reserved)
				}
				if tc.tight > 0 && total > tc.tight { // the budget has no room for more now
					total = least
				}
				reserved = total
				arrived := src.arrived // read, buffered in br, or waiting
				if total > min(n, arrived+chunk) {
					t.Fatalf("reserved %d with %d arrived", total, arrived)
				}
				if tc.reserveAt > 0 && total >= tc.reserveAt {
					return 0, errRefusedForTest
				}
				return total, nil
			}
			var spare func(int) *[]byte
			asked, lent := 0, 0
			if tc.spares > 0 {
				freeBuffers(&pool.BufPool, tc.spares, n)
				spare = func(k int) *[]byte {
					if asked++; k != n {
						t.Fatalf("asked for a spare of %d bytes for a %d-byte frame", k, n)
					}
					b := pool.Spare(k)
					if b != nil {
						lent++
					}
					return b
				}
			}
			buf, err := readArrived(br, queued, nil, pool, spare, n, reserve)
			if asked > 1 {
				t.Errorf("asked for a spare %d times, want at most once a frame", asked)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if tc.spares > 0 && lent != 1 {
					t.Errorf("%d spares lent, want 1", lent)
				}
				if buf != nil || pool.gets+lent != pool.puts {
					t.Fatalf("failed read kept a buffer: %d gets, %d lent, %d puts", pool.gets, lent, pool.puts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(*buf, data[:n]) {
				t.Fatal("frame bytes differ from those sent")
			}
			if tc.noAsk && src.asks > 0 {
				t.Errorf("asked the kernel's count %d times for a frame one chunk covers", src.asks)
			}
			if tc.maxGets < 0 && (lent != 1 || pool.gets != 0) { // the spare is the frame's one buffer
				t.Errorf("%d spares lent and %d buffers taken, want the one spare alone", lent, pool.gets)
			}
			for _, w := range []struct {
				what      string
				got, most int
			}{{"reservations", reserves, tc.maxReserves}, {"buffers", pool.gets, tc.maxGets}, {"reads", src.reads, tc.maxReads}} {
				if w.most > 0 && w.got > w.most {
					t.Errorf("%d %s, want at most %d", w.got, w.what, w.most)
				}
			}
			if pool.gets+lent-pool.puts != 1 {
				t.Errorf("%d gets, %d lent, %d puts: want the frame's buffer alone kept", pool.gets, lent, pool.puts)
			}
		})
	}
}

var errRefusedForTest = errors.New("refused by the test")

// TestSocketQueue: a TCP socket's count is the bytes sent and not yet read;
// a connection that is not plain TCP has none.
func TestSocketQueue(t *testing.T) {
	if !canQueryQueue {
		t.Skip("the kernel's count is not asked on this platform")
	}
	srv, cli := loopbackPair(t)
	q := socketQueue(srv)
	if q == nil {
		t.Fatal("no count for a TCP connection")
	}
	if _, err := cli.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q() != 1000 {
		if time.Now().After(deadline) {
			t.Fatalf("count %d, want 1000 within 5s", q())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := io.ReadFull(srv, make([]byte, 400)); err != nil {
		t.Fatal(err)
	}
	if got := q(); got != 600 {
		t.Fatalf("count %d after reading 400, want 600", got)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if socketQueue(a) != nil {
		t.Fatal("a count for a connection that is not TCP")
	}
}

// TestGrowUpTo: the kernel's bytes are reserved at once only when the
// budget and the shares have room now; otherwise the step is the one chunk
// that waits as before, and nobody else is closed for it.
func TestGrowUpTo(t *testing.T) {
	const kib = 1 << 10
	tests := []struct {
		name        string
		budgetTaken int64 // by another frame
		otherHeld   int64 // another connection's unfinished frame, same IP
		total       int
		want        int
	}{
		{name: "room", total: 1024 * kib, want: 1024 * kib},
		{name: "budget spent", budgetTaken: 3 * 1024 * kib, total: 1024 * kib, want: 64 * kib},
		{name: "IP share full", otherHeld: 900 * kib, total: 512 * kib, want: 64 * kib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(Limits{QueuedMaxRequestBytes: 4 << 20, MaxPartialFrameBytesPerIP: 1 << 20,
				MaxPartialFrameBytesPerConn: 4 << 20}, slog.New(slog.DiscardHandler), nil)
			if tc.budgetTaken > 0 && !g.budget.TryAcquire(tc.budgetTaken) {
				t.Fatal("budget setup")
			}
			cut := false
			other := newHolder("10.0.0.1", func(string, error) { cut = true })
			if tc.otherHeld > 0 {
				if err := g.takeShare(other, tc.otherHeld); err != nil {
					t.Fatal(err)
				}
			}
			h := newHolder("10.0.0.1", func(string, error) { t.Error("the asker was closed") })
			r := &growth{g: g, h: h}
			got, err := r.growUpTo(t.Context(), tc.total, 64*kib)
			if err != nil || got != tc.want || r.reserved != got || h.held != int64(got) {
				t.Fatalf("growUpTo = %d, %v (reserved %d, held %d), want %d", got, err, r.reserved, h.held, tc.want)
			}
			if cut || other.held != tc.otherHeld {
				t.Fatalf("the other holder was cut (holds %d of %d)", other.held, tc.otherHeld)
			}
			g.dropShare(h)
			g.release(r.reserved, false)
			g.dropShare(other)
			if len(g.partial) != 0 || g.allShare.held != 0 || !g.budget.TryAcquire(g.lim.QueuedMaxRequestBytes-g.reserve-tc.budgetTaken) {
				t.Fatalf("after the drops: %d IPs, %d bytes held, or budget not all back", len(g.partial), g.allShare.held)
			}
		})
	}
}

// loopbackPair is a TCP connection on 127.0.0.1: the accepted end and the
// dialed one, both closed when the test ends.
func loopbackPair(tb testing.TB) (srv, cli net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	if cli, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	if srv, err = ln.Accept(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv, cli
}
