package proxy

import (
	"testing"
	"time"
)

// TestFramePoolTrimmer: the Server's trimmer trims its frame pool on each
// tick of a ticker started with BufTrimInterval, so a burst's frames are
// gone after two trims without use; kproxy_buffer_pool_free_bytes follows;
// and Run returns only after the trimmer stopped its ticker (it is joined).
func TestFramePoolTrimmer(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		wantEvery time.Duration
	}{
		{"default interval", 0, 10 * time.Second},
		{"configured interval", 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ticks := make(chan time.Time) // unbuffered: a send returns once the trimmer is back for more
			stopped := make(chan struct{})
			var every time.Duration
			ts := startServerWith(t, Config{BufTrimInterval: tc.interval}, newFakeDispatcher(false), func(d *deps) {
				d.trimTicks = func(e time.Duration) (<-chan time.Time, func()) {
					every = e
					return ticks, func() { close(stopped) }
				}
			})
			gauge := func() float64 {
				t.Helper()
				mfs, err := ts.reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, mf := range mfs {
					if mf.GetName() == "kproxy_buffer_pool_free_bytes" {
						return mf.GetMetric()[0].GetGauge().GetValue()
					}
				}
				t.Fatal("kproxy_buffer_pool_free_bytes is not registered")
				return 0
			}
			tick := func() {
				t.Helper()
				select {
				case ticks <- time.Time{}:
				case <-time.After(testWait):
					t.Fatalf("the trimmer took no tick within %s", testWait)
				}
			}
			if g := gauge(); g != 0 {
				t.Fatalf("fresh pool: gauge %v, want 0", g)
			}
			burst := make([]*[]byte, 4)
			for i := range burst {
				burst[i] = ts.bufs.Get(mib)
			}
			for _, b := range burst {
				ts.bufs.Put(b)
			}
			if g := gauge(); g != 4*mib {
				t.Fatalf("after a burst: gauge %v, want %d", g, 4*mib)
			}
			// A send returns when the trimmer takes the tick, so the third
			// returns after the second Trim (the first keeps the burst: it
			// was not yet idle a whole interval; kwire's tests cover that).
			for range 3 {
				tick()
			}
			if every != tc.wantEvery {
				t.Fatalf("ticker started every %s, want %s", every, tc.wantEvery)
			}
			if g, free := gauge(), ts.bufs.FreeBytes(); g != 0 || free != 0 {
				t.Fatalf("after two idle trims: gauge %v, FreeBytes %d, want 0", g, free)
			}
			ts.stop(t)
			select {
			case <-stopped:
			default:
				t.Fatal("Run returned before the trimmer stopped its ticker")
			}
		})
	}
}
