package proxy

import (
	"bytes"
	"context"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
)

// sumsDispatcher checks, inside each Begin (the sums are valid only
// there), what Header.Sums says of ranges of the body, and records it.
type sumsDispatcher struct {
	*fakeDispatcher
	mu   sync.Mutex
	seen []sumsSeen
}

type sumsSeen struct {
	key   int16
	had   bool // Header.Sums was set
	wrong int  // ranges whose sum was not crc32's
}

var castagnoliRef = crc32.MakeTable(crc32.Castagnoli)

func (d *sumsDispatcher) Begin(ctx context.Context, conn uint64, h apis.Header, body []byte) call {
	s := sumsSeen{key: h.Key, had: h.Sums != nil}
	if s.had {
		n := len(body)
		for _, r := range [][2]int{{0, n}, {1, n}, {n / 3, n - 7}, {61, n / 2}, {n - 1, n}} {
			if r[0] >= r[1] || r[0] < 0 {
				continue
			}
			if got, ok := h.Sums.Checksum(body[r[0]:r[1]]); !ok || got != crc32.Checksum(body[r[0]:r[1]], castagnoliRef) {
				s.wrong++
			}
		}
		if _, ok := h.Sums.Checksum(bytes.Clone(body)); ok {
			s.wrong++ // bytes outside the frame have no sums
		}
	}
	d.mu.Lock()
	d.seen = append(d.seen, s)
	d.mu.Unlock()
	return d.fakeDispatcher.Begin(ctx, conn, h, body)
}

// TestFrameSums: the connection hands the dispatcher the sums of exactly
// the frames it names (Produce here), right for every range of the body,
// whether the frame arrived whole in the read buffer or in many reads;
// other frames, and a dispatcher that names none, get none.
func TestFrameSums(t *testing.T) {
	produceOnly := func(d *deps) { d.frameSums = func(key int16) bool { return key == 0 } }
	for _, tc := range []struct {
		name string
		edit func(*deps)
		key  int16
		size int
		want bool
	}{
		{"small produce", produceOnly, 0, 600, true},
		{"produce in many reads", produceOnly, 0, 3*kwire.ReadChunkBytes + 17, true},
		{"metadata", produceOnly, 3, 600, false},
		{"large metadata", produceOnly, 3, 2 * kwire.ReadChunkBytes, false},
		{"produce, none named", nil, 0, 3 * kwire.ReadChunkBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &sumsDispatcher{fakeDispatcher: newFakeDispatcher(false)}
			ts := startServerWith(t, Config{}, d, tc.edit)
			c := dial(t, ts)
			body := make([]byte, tc.size)
			for i := range body {
				body[i] = byte(i*31 + 1) // not 'z' first: the fake's acks=0 marker
			}
			for corr := range int32(3) { // the sums' table is reused from frame to frame
				c.send(tc.key, 9, corr, body)
				if got, _ := c.read(); got != corr {
					t.Fatalf("response to %d, want %d", got, corr)
				}
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.seen) != 3 {
				t.Fatalf("%d requests reached the dispatcher, want 3", len(d.seen))
			}
			for i, s := range d.seen {
				if s.had != tc.want || s.wrong != 0 {
					t.Fatalf("request %d: sums given %v (want %v), %d ranges wrong", i, s.had, tc.want, s.wrong)
				}
			}
		})
	}
}

// TestFrameSumsAllocate: once warm, a frame's sums allocate nothing.
func TestFrameSumsAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	var pool sync.Pool
	f := frameSums{want: func(int16) bool { return true }, pool: &pool}
	frame := make([]byte, 1<<20)
	allocs := testing.AllocsPerRun(20, func() {
		f.start()
		for off := 0; off < len(frame); off += kwire.ReadChunkBytes {
			f.Observe(frame[off : off+kwire.ReadChunkBytes])
		}
		if f.bind(frame) == nil {
			t.Fatal("no sums for a frame it wants")
		}
		f.release()
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per frame", allocs)
	}
}
