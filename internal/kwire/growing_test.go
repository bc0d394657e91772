package kwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
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
		{"first chunk exactly", FirstReadBytes, FirstReadBytes},
		{"grows", 3*FirstReadBytes + 7, 3*FirstReadBytes + 7},
		{"truncated", 1 << 20, 1000},
		{"truncated after growth", 1 << 20, FirstReadBytes + 1},
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
	if n := after.TotalAlloc - before.TotalAlloc; n > 2*FirstReadBytes {
		t.Fatalf("%d bytes allocated for a truncated claim", n)
	}
}

// FuzzReadGrowing: the frame read is exactly the claimed bytes when they are
// all there, and an error otherwise; never a panic.
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
		buf, err := p.ReadGrowing(trickle{bytes.NewReader(rest)}, n)
		if len(rest) < n {
			if err == nil {
				t.Fatalf("claimed %d with %d bytes: no error", n, len(rest))
			}
			return
		}
		if err != nil || !bytes.Equal(*buf, rest[:n]) {
			t.Fatalf("claimed %d with %d bytes: err %v", n, len(rest), err)
		}
		p.Put(buf)
	})
}
