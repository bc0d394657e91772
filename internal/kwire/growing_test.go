package kwire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strconv"
	"testing"
)

// trickle returns at most one byte per Read, like a slow writer.
type trickle struct{ r io.Reader }

func (t trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), 1)]) }

func TestReadGrowing(t *testing.T) {
	var p BufPool
	for _, tc := range []struct {
		name    string
		n, have int
	}{
		{"empty", 0, 0},
		{"small", 100, 100},
		{"first chunk exactly", ReadChunkBytes, ReadChunkBytes},
		{"grows", 3*ReadChunkBytes + 7, 3*ReadChunkBytes + 7},
		{"truncated", 1 << 20, 1000},
		{"truncated after growth", 1 << 20, ReadChunkBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := make([]byte, tc.have)
			for i := range src {
				src[i] = byte(i * 7)
			}
			buf, err := p.ReadGrowing(bytes.NewReader(src), tc.n)
			if tc.have < tc.n {
				if !errors.Is(err, io.ErrUnexpectedEOF) && !(tc.have == 0 && errors.Is(err, io.EOF)) {
					t.Fatalf("short input: err %v, want unexpected EOF", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(*buf, src[:tc.n]) {
				t.Fatalf("frame differs from input (len %d, want %d)", len(*buf), tc.n)
			}
			p.Put(buf)
		})
	}
}

// A claim of 64 MiB with 10 bytes behind it allocates the first chunk only.
func TestReadGrowingClaimCostsNothing(t *testing.T) {
	var p BufPool
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := p.ReadGrowing(trickle{bytes.NewReader(make([]byte, 10))}, 64<<20); err == nil {
		t.Fatal("truncated frame read without error")
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 2*ReadChunkBytes {
		t.Fatalf("%d bytes allocated for a truncated claim", n)
	}
}

// counting counts the bytes read through it.
type counting struct {
	r io.Reader
	n int
}

func (c *counting) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += k
	return k, err
}

// checkSteps reads an n-byte claim backed by have bytes, through a
// bufio.Reader as the proxy reads clients, and checks the promise of
// ReadGrowingReserved: the first reservation waits for a byte, each one is
// at most the bytes that arrived plus ReadChunkBytes, reservations only
// grow and end at n, and the bytes read before the last growth (an upper
// bound on what the growth copied) are at most about n.
func checkSteps(t *testing.T, p *BufPool, n, have int) {
	t.Helper()
	src := &counting{r: bytes.NewReader(make([]byte, have))}
	var totals []int
	buf, err := p.ReadGrowingReserved(bufio.NewReaderSize(src, 4<<10), n, func(total int) error {
		arrived := src.n // what left the source: read, or buffered by bufio
		switch {
		case arrived == 0:
			t.Fatalf("claim %d: reserved %d before any byte arrived", n, total)
		case len(totals) > 0 && total <= totals[len(totals)-1]:
			t.Fatalf("claim %d: reservations %v then %d: not growing", n, totals, total)
		case total > arrived+ReadChunkBytes:
			t.Fatalf("claim %d: reserved %d with %d bytes arrived", n, total, arrived)
		}
		totals = append(totals, total)
		return nil
	})
	if have < n {
		if err == nil {
			t.Fatalf("claimed %d with %d bytes: no error", n, have)
		}
		return
	}
	if err != nil || len(*buf) != n {
		t.Fatalf("claimed %d with %d bytes: err %v", n, have, err)
	}
	if n > 0 && cap(*buf) >= 2*max(n, 512) && n <= 16<<20 {
		t.Fatalf("claim %d: buffer of %d bytes", n, cap(*buf))
	}
	p.Put(buf)
	if n > 0 && totals[len(totals)-1] != n {
		t.Fatalf("claim %d: last reservation %d", n, totals[len(totals)-1])
	}
}

func TestReadGrowingSteps(t *testing.T) {
	var p BufPool
	for _, n := range []int{
		0, 1, ReadChunkBytes - 1, ReadChunkBytes, ReadChunkBytes + 1, 2 * ReadChunkBytes,
		3 << 20, 16 << 20, 16<<20 + 1, 2<<20 + 1, 100 << 20,
	} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			checkSteps(t, &p, n, n)
			checkSteps(t, &p, n, n/3)
		})
	}
}

// collect is an Observer that keeps the new bytes it saw, and counts the
// calls whose bytes read before the new ones were not those it kept (by
// length and their last 64 bytes: a trickle makes many calls).
type collect struct {
	got   []byte
	wrong int
}

func (c *collect) Observe(read []byte, k int) {
	before := read[:len(read)-k]
	tail := max(0, len(before)-64)
	if k <= 0 || len(before) != len(c.got) || !bytes.Equal(before[tail:], c.got[tail:]) {
		c.wrong++
	}
	c.got = append(c.got, read[len(read)-k:]...)
}

// TestReadGrowingObserved: the observer sees every byte of the frame once,
// in order, whether the bytes come from bufio's buffer, straight from the
// source into the frame, or a few at a time.
func TestReadGrowingObserved(t *testing.T) {
	var p BufPool
	for _, n := range []int{1, 100, 4 << 10, ReadChunkBytes + 3, 3<<20 + 1} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		readers := map[string]io.Reader{
			"bufio":   bufio.NewReaderSize(bytes.NewReader(src), 4<<10),
			"trickle": trickle{bytes.NewReader(src)},
		}
		for name, r := range readers {
			var seen collect
			buf, err := p.ReadGrowingObserved(r, n, func(int) error { return nil }, &seen)
			if err != nil {
				t.Fatalf("%s, %d bytes: %v", name, n, err)
			}
			if !bytes.Equal(seen.got, src) || seen.wrong != 0 || !bytes.Equal(*buf, src) {
				t.Fatalf("%s, %d bytes: observed %d bytes, not the frame's (%d calls showed other bytes as read)", name, n, len(seen.got), seen.wrong)
			}
			p.Put(buf)
		}
	}
}

// FuzzReadGrowing: the frame read is exactly the claimed bytes when they are
// all there, and an error otherwise, and the observer saw exactly them;
// never a panic; and the growth keeps the promise of ReadGrowingReserved
// (checkSteps).
func FuzzReadGrowing(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{0, 0, 0, 9, 'a'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 4, 0, 0, 1, 2, 3})
	var p BufPool
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		n := int(binary.BigEndian.Uint32(in) % (4 << 20)) // bounded like a frame limit
		rest := in[4:]
		var seen collect
		buf, err := p.ReadGrowingObserved(trickle{bytes.NewReader(rest)}, n, nil, &seen)
		if len(rest) < n {
			if err == nil {
				t.Fatalf("claimed %d with %d bytes: no error", n, len(rest))
			}
		} else if err != nil || !bytes.Equal(*buf, rest[:n]) {
			t.Fatalf("claimed %d with %d bytes: err %v", n, len(rest), err)
		} else if !bytes.Equal(seen.got, rest[:n]) || seen.wrong != 0 {
			t.Fatalf("claimed %d: the observer saw %d other bytes (%d calls showed other bytes as read)", n, len(seen.got), seen.wrong)
		} else {
			p.Put(buf)
		}
		// The same claim with zeros behind it, for the growth's bounds.
		checkSteps(t, &p, n, min(n, len(rest)))
	})
}

// A 16 MiB frame allocates each pool class from the first chunk up once:
// about 2x the frame, as the buffer doubles.
func TestReadGrowingAllocates(t *testing.T) {
	var p BufPool
	const n = 16 << 20
	src := make([]byte, n)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	buf, err := p.ReadGrowing(bytes.NewReader(src), n)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	p.Put(buf)
	if got, want := after.TotalAlloc-before.TotalAlloc, uint64(2*n+1<<20); got > want {
		t.Fatalf("%d bytes allocated to read a %d-byte frame, want at most %d", got, n, want)
	}
}

// BenchmarkReadGrowing reads one 16 MiB frame (the largest pooled class)
// and one just above it, as a client's produce frame is read.
func BenchmarkReadGrowing(b *testing.B) {
	for _, n := range []int{16 << 20, 16<<20 + 1} {
		src := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var p BufPool
			r := bytes.NewReader(src)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(src)
				buf, err := p.ReadGrowing(r, n)
				if err != nil {
					b.Fatal(err)
				}
				p.Put(buf)
			}
		})
	}
}
