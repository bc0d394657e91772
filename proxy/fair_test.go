package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
)

// apiVersionsV3 is an ApiVersions v3 body: empty client software name and
// version, no tags.
var apiVersionsV3 = []byte{0, 0, 0}

// TestBystandersServed: two addresses (127.0.0.2 and .3) hold unfinished
// frames at their shares of a 4 MiB budget (half each, the default), and a
// third address (127.0.0.4) is answered within a second, for a small
// request and a larger one. Before, a bare size claim reserved 256 KiB, so
// 8 claims per address spent the budget, and a frame's reservation ran 8x
// ahead of its bytes, so one frame per address held the whole budget: the
// third address waited until request-read-timeout (30 s) cut the holders.
// Now claims hold nothing, and the second frame that would pass the share
// of all unfinished frames (the budget outside the small-frame reserve)
// closes the larger holder.
func TestBystandersServed(t *testing.T) {
	const budget = 4 * mib
	claims := func(t *testing.T, ts *testServer) {
		for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			for range 8 {
				dialFrom(t, ts, ip).raw(binary.BigEndian.AppendUint32(nil, 2*mib))
			}
		}
		waitFor(t, func() bool { return testutil.ToFloat64(ts.m.conns) == 16 }, "16 claims connected")
	}
	atCaps := func(t *testing.T, ts *testServer) {
		const sent = 1950 << 10
		for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
			c := dialFrom(t, ts, ip)
			// Errors ignored: a holder may be closed while it writes.
			_, _ = c.nc.Write(binary.BigEndian.AppendUint32(nil, 2*mib))
			_, _ = c.nc.Write(make([]byte, sent))
			waitFor(t, func() bool {
				return testutil.ToFloat64(ts.g.queued) >= float64((i+1)*sent) ||
					testutil.ToFloat64(ts.g.badInput.WithLabelValues(badAllShare)) == 1
			}, fmt.Sprintf("holder %d's bytes read, or a holder cut", i+1))
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ts *testServer)
		size  int // the bystander's request body
	}{
		{"bare size claims, small request", claims, len(apiVersionsV3)},
		{"bare size claims, 256 KiB request", claims, 256 << 10},
		{"a frame per address at its cap, small request", atCaps, len(apiVersionsV3)},
		{"a frame per address at its cap, 256 KiB request", atCaps, 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{Logger: slog.New(slog.DiscardHandler),
				Limits: Limits{QueuedMaxRequestBytes: budget, RequestReadTimeout: time.Hour}}, newFakeDispatcher(false))
			tc.setup(t, ts)
			good := dialFrom(t, ts, "127.0.0.4")
			body := apiVersionsV3
			if tc.size > len(body) {
				body = make([]byte, tc.size) // the fake dispatcher answers any body
			}
			start := time.Now()
			good.send(18, 3, 7, body)
			_ = good.nc.SetReadDeadline(start.Add(time.Second))
			f, err := kwire.ReadFrame(good.br, 4, 1<<30, nil)
			if err != nil {
				t.Fatalf("no answer within 1 s: %v (queued %v bytes)", err, testutil.ToFloat64(ts.g.queued))
			}
			if corr := int32(binary.BigEndian.Uint32(*f)); corr != 7 {
				t.Fatalf("answered with correlation id %d, want 7", corr)
			}
		})
	}
}

// TestLargestHolderIsCut: one connection of an address holds nearly the
// address's whole 2 MiB share with an unfinished frame. Another connection
// of the same address is served: a small complete request takes no share,
// and a 128 KiB one passes the share and closes the holder (the largest),
// not the asker. Each cut is counted under partial_ip_share and logged at
// most once per interval. Before, the asker was closed every time.
func TestLargestHolderIsCut(t *testing.T) {
	const budget = 4 * mib
	for _, tc := range []struct {
		name string
		size int // the second connection's request body
		cut  bool
	}{
		{"small complete request", len(apiVersionsV3), false},
		{"128 KiB request", 128 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var out bytes.Buffer
			log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &out}, nil))
			ts := startServer(t, Config{Logger: log, Limits: Limits{QueuedMaxRequestBytes: budget,
				RequestReadTimeout: time.Hour, BadInputLogInterval: time.Hour}}, newFakeDispatcher(false))
			const rounds = 2
			held := testutil.ToFloat64(ts.g.queued)
			for round := range rounds {
				// A holder cut in the round before gives its reservation
				// back when its connection ends, which may be after this
				// round begins: wait for it, or the wait below counts it.
				waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) <= held }, "the previous holder's reservation given back")
				holder := dialFrom(t, ts, "127.0.0.2")
				holder.raw(binary.BigEndian.AppendUint32(nil, 2*mib))
				holder.raw(make([]byte, 1900<<10))
				waitFor(t, func() bool { return testutil.ToFloat64(ts.g.queued) >= held+1900<<10 }, "the holder's bytes read")
				asker := dialFrom(t, ts, "127.0.0.2")
				body := apiVersionsV3
				if tc.size > len(body) {
					body = make([]byte, tc.size)
				}
				corr := int32(10 + round)
				asker.send(18, 3, corr, body)
				if got, _ := asker.read(); got != corr {
					t.Fatalf("round %d: the asker got correlation id %d, want %d", round, got, corr)
				}
				if !tc.cut {
					if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badIPShare)); v != 0 {
						t.Fatalf("%s count = %v for a complete request, want 0", badIPShare, v)
					}
					return
				}
				holder.expectClosed()
			}
			if v := testutil.ToFloat64(ts.g.badInput.WithLabelValues(badIPShare)); v != rounds {
				t.Fatalf("%s count = %v, want %d", badIPShare, v, rounds)
			}
			mu.Lock()
			defer mu.Unlock()
			line := fmt.Sprintf("reason=%s", badIPShare)
			if n := strings.Count(out.String(), line); n != 1 || !strings.Contains(out.String(), "largest unfinished frame") {
				t.Fatalf("%d log lines with %s for %d cuts, want 1 naming the largest holder:\n%s", n, line, rounds, out.String())
			}
		})
	}
}

// TestTakeShareCutsLargest drives the shares' heaps directly: whichever
// holder asks, the largest other holder of the passed share is cut (its
// bytes leave at once), or the asker when it already holds the most; the
// totals always equal the holders' sum.
func TestTakeShareCutsLargest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   []int64 // holders of one IP, in order of arrival
		asker  int     // index of the asking holder; len(held): a new one
		total  int64   // what it asks for
		cut    []int   // holders cut, in order
		refuse string  // the asker's refusal reason, if refused
	}{
		{"fits", []int64{100, 200}, 2, 100, nil, ""},
		{"new asker cuts the largest", []int64{300, 500, 200}, 3, 100, []int{1}, ""},
		{"grower cuts a larger one", []int64{300, 400, 250}, 0, 400, []int{1}, ""},
		{"cuts until it fits", []int64{350, 340, 300}, 3, 600, []int{0, 1}, ""},
		{"the largest asker is refused", []int64{600, 200, 100}, 0, 750, nil, badIPShare},
		{"alone over the share", []int64{900}, 0, 1001, nil, badIPShare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(Limits{QueuedMaxRequestBytes: 1 << 20, MaxPartialFrameBytesPerIP: 1000,
				MaxPartialFrameBytesPerConn: 1 << 20}, slog.New(slog.DiscardHandler), nil)
			var cut []int
			holders := make([]*holder, len(tc.held)+1)
			for i := range holders {
				holders[i] = newHolder("10.0.0.1", func(string, error) { cut = append(cut, i) })
			}
			for i, n := range tc.held {
				if err := g.takeShare(holders[i], n); err != nil {
					t.Fatalf("holder %d takes %d: %v", i, n, err)
				}
			}
			err := g.takeShare(holders[tc.asker], tc.total)
			var bad *badFrameError
			switch {
			case tc.refuse == "" && err != nil:
				t.Fatalf("asker refused: %v", err)
			case tc.refuse != "" && (!errors.As(err, &bad) || bad.reason != tc.refuse):
				t.Fatalf("asker: %v, want a %s refusal", err, tc.refuse)
			}
			if fmt.Sprint(cut) != fmt.Sprint(tc.cut) {
				t.Fatalf("cut %v, want %v", cut, tc.cut)
			}
			var sum int64
			for i, h := range holders {
				if slices.Contains(cut, i) && h.held != 0 {
					t.Errorf("holder %d cut but holds %d", i, h.held)
				}
				sum += h.held
			}
			ip := g.partial["10.0.0.1"]
			if ip == nil || ip.held != sum || g.allShare.held != sum || ip.heap.Len() != g.allShare.heap.Len() {
				t.Fatalf("share totals %+v / %d, want %d", ip, g.allShare.held, sum)
			}
			if tc.refuse != "" && len(tc.held) == 1 {
				g.dropShare(holders[0])
				if err := g.takeShare(holders[1], 1001); err == nil || len(g.partial) != 0 {
					t.Fatalf("a new holder over the share: %v, %d IPs kept", err, len(g.partial))
				}
			}
			for _, h := range holders {
				g.dropShare(h)
			}
			if len(g.partial) != 0 || g.allShare.held != 0 || g.allShare.heap.Len() != 0 {
				t.Fatalf("after every holder dropped: %d IPs, %d bytes, %d in the heap", len(g.partial), g.allShare.held, g.allShare.heap.Len())
			}
		})
	}
}
