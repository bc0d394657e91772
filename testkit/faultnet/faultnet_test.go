package faultnet

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// echoServer echoes every connection until EOF and then half-closes it.
type echoServer struct {
	ln    *net.TCPListener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []*net.TCPConn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				if _, err := io.Copy(c, c); err == nil {
					c.CloseWrite()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func newRelay(t *testing.T, target string, opts ...Option) *Relay {
	t.Helper()
	r, err := NewRelay("127.0.0.1:0", target, nil, opts...)
	if err != nil {
		t.Fatalf("NewRelay: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes msg and reads the echo, failing after timeout.
func roundTrip(t *testing.T, c net.Conn, msg []byte, timeout time.Duration) {
	t.Helper()
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read echo of %d bytes: %v", len(msg), err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo differs from what was sent")
	}
}

// expectSilence fails if any byte arrives on c within d.
func expectSilence(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("expected no bytes for %s, got n=%d err=%v", d, n, err)
	}
}

// expectDead fails unless c reports reset or EOF within 5 s; bytes that
// were already on their way are read and dropped.
func expectDead(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for range 1000 {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("expected the connection to be reset or closed within 5s, got err=%v", err)
		}
		return
	}
	t.Fatalf("connection still delivering bytes after 1000 reads")
}

// dialDead dials addr and expects the connection to be reset at once: the
// reset may even beat the dialer's own check of the handshake.
func dialDead(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		if !strings.Contains(err.Error(), "reset") {
			t.Fatalf("dial %s: %v, want a reset", addr, err)
		}
		return
	}
	defer c.Close()
	expectDead(t, c)
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// TestForwarding runs for both ways of copying: splice (the default) and
// through a user-space buffer (UserSpaceCopy).
func TestForwarding(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"splice", nil}, {"user-space copy", []Option{UserSpaceCopy()}}} {
		t.Run(mode.name, func(t *testing.T) { testForwarding(t, mode.opts...) })
	}
}

func testForwarding(t *testing.T, opts ...Option) {
	echo := startEcho(t)
	r := newRelay(t, echo.addr(), opts...)
	tests := []struct {
		name string
		size int
	}{
		{"one byte", 1},
		{"small", 100},
		{"larger than a pipe", 3 << 20},
	}
	c := dial(t, r.Addr())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := pattern(tc.size)
			errc := make(chan error, 1)
			go func() { _, err := c.Write(msg); errc <- err }()
			got := make([]byte, len(msg))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read echo: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("echo differs")
			}
		})
	}
	// A half-close travels through: the echo server sees EOF and closes its
	// side, which reaches us as EOF.
	if err := c.CloseWrite(); err != nil {
		t.Fatalf("CloseWrite: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after half-close: n=%d err=%v, want EOF", n, err)
	}
	if got := r.Accepted(); got != 1 {
		t.Fatalf("Accepted = %d, want 1", got)
	}
}

func TestCutResetsAndRefusesUntilHeal(t *testing.T) {
	echo := startEcho(t)
	r := newRelay(t, echo.addr())
	old := dial(t, r.Addr())
	roundTrip(t, old, []byte("before"), 5*time.Second)

	r.Cut()
	expectDead(t, old)
	dialDead(t, r.Addr()) // the kernel completes the handshake; the relay resets
	if n := r.Active(); n != 0 {
		t.Fatalf("Active after Cut = %d, want 0", n)
	}

	r.Heal()
	fresh := dial(t, r.Addr())
	roundTrip(t, fresh, []byte("after heal"), 5*time.Second)
}

func TestPauseHoldsBytesUntilHeal(t *testing.T) {
	echo := startEcho(t)
	r := newRelay(t, echo.addr())
	c := dial(t, r.Addr())
	roundTrip(t, c, []byte("warm"), 5*time.Second) // the copy is now in splice

	r.Pause()
	msg := []byte("held while paused")
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("write while paused: %v", err)
	}
	expectSilence(t, c, 300*time.Millisecond)
	late := dial(t, r.Addr()) // new connections are accepted but held too
	if _, err := late.Write([]byte("x")); err != nil {
		t.Fatalf("write on new conn while paused: %v", err)
	}
	expectSilence(t, late, 100*time.Millisecond)

	r.Heal()
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("after heal read %q, %v; want %q", got, err, msg)
	}
	one := make([]byte, 1)
	late.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(late, one); err != nil || one[0] != 'x' {
		t.Fatalf("new conn after heal read %q, %v", one, err)
	}
}

func TestDelayAddsLatencyBothWays(t *testing.T) {
	echo := startEcho(t)
	r := newRelay(t, echo.addr())
	c := dial(t, r.Addr())
	roundTrip(t, c, []byte("warm"), 5*time.Second)

	// d is large against scheduler noise on a loaded machine: the checks
	// compare round trips with the delayed floor (2*d), not with d.
	const d = 400 * time.Millisecond
	r.Delay(d)
	start := time.Now()
	roundTrip(t, c, []byte("slow"), 10*time.Second)
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip with Delay(%s) took %s, want >= %s", d, rtt, 2*d)
	}

	// Latency, not a rate limit: many chunks in flight cost about one delay.
	start = time.Now()
	msg := pattern(1 << 20)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(msg); errc <- err }()
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("1 MiB through delay: err=%v equal=%t", err, bytes.Equal(got, msg))
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if took := time.Since(start); took > 32*d {
		t.Fatalf("1 MiB with Delay(%s) took %s: delay acts as a rate limit", d, took)
	}

	r.Delay(0)
	start = time.Now()
	roundTrip(t, c, []byte("fast again"), 5*time.Second)
	if rtt := time.Since(start); rtt >= 2*d {
		t.Fatalf("round trip after Delay(0) took %s: still at least the delayed %s", rtt, 2*d)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	tests := []struct {
		name  string
		fault func(*Relay)
	}{
		{"forwarding", func(*Relay) {}},
		{"paused", (*Relay).Pause},
		{"delayed", func(r *Relay) { r.Delay(time.Hour) }},
		{"cut", (*Relay).Cut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			echo := startEcho(t)
			r := newRelay(t, echo.addr())
			conns := make([]*net.TCPConn, 3)
			for i := range conns {
				conns[i] = dial(t, r.Addr())
				roundTrip(t, conns[i], []byte("hi"), 5*time.Second)
			}
			tc.fault(r)
			if _, err := conns[0].Write([]byte("in flight")); err != nil && tc.name != "cut" {
				t.Fatalf("write: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- r.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Close: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Close did not return within 10s")
			}
			// Close waits for every goroutine to call Done; give the last
			// ones the moment they need to return.
			stacks := relayGoroutines()
			for deadline := time.Now().Add(2 * time.Second); stacks != "" && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				stacks = relayGoroutines()
			}
			if stacks != "" {
				t.Fatalf("goroutines of the relay remain 2s after Close:\n%s", stacks)
			}
			for _, c := range conns {
				expectDead(t, c)
			}
			if _, err := net.DialTimeout("tcp", r.Addr(), time.Second); err == nil {
				t.Fatalf("dial after Close succeeded")
			}
			if err := r.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// relayGoroutines returns the stacks of goroutines running relay code.
func relayGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultnet.(*Relay)") {
			found = append(found, g)
		}
	}
	return strings.Join(found, "\n\n")
}

func TestDialFailureResetsClient(t *testing.T) {
	dead, err := testrig.FreeAddr() // nothing listens on it
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, dead)
	dialDead(t, r.Addr())
}

func BenchmarkRelayThroughput(b *testing.B) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	sink := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sink <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		sink <- err
	}()
	r, err := NewRelay("127.0.0.1:0", ln.Addr().String(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	if err := <-sink; err != nil {
		b.Fatal(err)
	}
}
