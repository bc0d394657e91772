package harness

import (
	"net"
	"os"
	"strings"
	"testing"
)

// TestConnsTo: connsTo counts this process's established connections to
// a port: none, then the two it dials (the listener's accepted ends have
// the port as their local one and do not count).
func TestConnsTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := strings.Cut(ln.Addr().String(), ":")
	count := func() int {
		t.Helper()
		n, err := connsTo(os.Getpid(), []string{port, "1"})
		if err != nil {
			t.Fatal(err)
		}
		if n[1] != 0 {
			t.Fatalf("connections to port 1: %d", n[1])
		}
		return n[0]
	}
	if n := count(); n != 0 {
		t.Fatalf("before dialing: %d connections, want 0", n)
	}
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
	}
	if n := count(); n != 2 {
		t.Fatalf("after dialing twice: %d connections, want 2", n)
	}
}

// TestPeerMedians: each kafscale-peer figure is the median of the rounds.
func TestPeerMedians(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3,1,2 = %v", m)
	}
	if m := median([]float64{4, 1}); m != 2.5 {
		t.Errorf("median of 4,1 = %v", m)
	}
	runs := []peerRun{{conns: []int{4, 16}}, {conns: []int{2, 64}}, {conns: []int{3, 32}}}
	if got, want := medianConns(runs), "broker 0: 3, broker 1: 32"; got != want {
		t.Errorf("medianConns = %q, want %q", got, want)
	}
}
