package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// produceFrame is a Produce v9 frame (without its size) of parts
// partitions, each a batch of records 1 KiB records; spans are where the
// batches lie.
func produceFrame(t testing.TB, parts, records int) (frame []byte, spans [][2]int) {
	batch := probe.Framed(probe.None, int32(records), int32(records-1), probe.Sized(records, 1024))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "bench"
	batches := make([][]byte, parts)
	for i := range parts {
		// Each its own partition leader epoch, which the CRC does not
		// cover, so that each batch is found in the frame.
		batches[i] = binary.BigEndian.AppendUint32(bytes.Clone(batch[:12]), uint32(i))
		batches[i] = append(batches[i], batch[16:]...)
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(i), batches[i]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 1)[4:]
	for _, b := range batches {
		off := bytes.Index(frame, b)
		if off < 0 {
			t.Fatal("a batch is not in the frame")
		}
		spans = append(spans, [2]int{off, off + len(b)})
	}
	return frame, spans
}

// sumsDispatcher checks, inside each Begin (the arrival is valid only
// there), what Header.Arrival says of ranges of the body, and records it.
type sumsDispatcher struct {
	*fakeDispatcher
	mu   sync.Mutex
	seen []sumsSeen
}

type sumsSeen struct {
	key   int16
	had   bool // Header.Arrival was set
	wrong int  // ranges whose sum was not crc32's
}

var castagnoliRef = crc32.MakeTable(crc32.Castagnoli)

func (d *sumsDispatcher) Begin(ctx context.Context, conn uint64, h apis.Header, body []byte) call {
	s := sumsSeen{key: h.Key, had: h.Arrival != nil}
	if s.had {
		n := len(body)
		for _, r := range [][2]int{{0, n}, {1, n}, {n / 3, n - 7}, {61, n / 2}, {n - 1, n}} {
			if r[0] >= r[1] || r[0] < 0 {
				continue
			}
			if got, ok := h.Arrival.Checksum(body[r[0]:r[1]]); !ok || got != crc32.Checksum(body[r[0]:r[1]], castagnoliRef) {
				s.wrong++
			}
		}
		if _, ok := h.Arrival.Checksum(bytes.Clone(body)); ok {
			s.wrong++ // bytes outside the frame have no sums
		}
	}
	d.mu.Lock()
	d.seen = append(d.seen, s)
	d.mu.Unlock()
	return d.fakeDispatcher.Begin(ctx, conn, h, body)
}

// TestFrameArrival: the connection hands the dispatcher the arrival of
// exactly the frames it names (Produce here), its sums right for every
// range of the body, whether the frame arrived whole in the read buffer or
// in many reads; other frames, and a dispatcher that names none, get none.
func TestFrameArrival(t *testing.T) {
	produceOnly := func(d *deps) { d.frameArrival = func(key int16) bool { return key == 0 } }
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

// TestFrameArrivalAllocates: once warm, a Produce frame's arrival (its
// sums and the walks of its batches) allocates nothing, and it walks every
// batch.
func TestFrameArrivalAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	var pool sync.Pool
	f := frameArrival{want: func(int16) bool { return true }, pool: &pool}
	frame, spans := produceFrame(t, 8, 100)
	checker, err := recordcheck.New(recordcheck.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Close()
	allocs := testing.AllocsPerRun(20, func() {
		f.start()
		for have := 0; have < len(frame); {
			k := min(len(frame)-have, kwire.ReadChunkBytes)
			have += k
			f.Observe(frame[:have], k)
		}
		a := f.bind(frame)
		if a == nil {
			t.Fatal("no arrival for a frame it wants")
		}
		if a.Walks() != len(spans) {
			t.Fatalf("the scan walked %d of %d batches", a.Walks(), len(spans))
		}
		for _, sp := range spans {
			if r := checker.CheckSummed(9, false, frame[sp[0]:sp[1]], a); !r.OK() {
				t.Fatalf("batch %v: %+v", sp, r)
			}
		}
		f.release()
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per frame", allocs)
	}
}
