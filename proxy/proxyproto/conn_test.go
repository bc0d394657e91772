package proxyproto

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// pair returns both ends of a TCP connection on 127.0.0.1: the accepted
// server end and the client end.
func pair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// drip writes b to c in chunks of size, pause apart, in the background.
func drip(t *testing.T, c net.Conn, b []byte, size int, pause time.Duration) {
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		for len(b) > 0 {
			n := min(size, len(b))
			if _, err := c.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			time.Sleep(pause)
		}
	}()
}

func TestReadServesTheClientAddress(t *testing.T) {
	hdr := v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 40000, 9092), 40)
	for _, tc := range []struct {
		name  string
		size  int
		pause time.Duration
	}{
		{"one write with the first request behind it", 1 << 20, 0},
		{"a byte at a time, complete within the timeout", 1, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := pair(t)
			drip(t, c, append(append([]byte(nil), hdr...), "request"...), tc.size, tc.pause)
			pc, h, err := Read(s, 5*time.Second, nil)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if got := pc.RemoteAddr().String(); got != "127.0.0.2:40000" || h.Dst != netip.MustParseAddrPort("127.0.0.1:9092") {
				t.Fatalf("RemoteAddr %s, header %+v", got, h)
			}
			if _, ok := pc.(*tcpConn); !ok {
				t.Fatalf("served %T, want *tcpConn (writev kept)", pc)
			}
			got := make([]byte, len("request"))
			if _, err := io.ReadFull(pc, got); err != nil || string(got) != "request" {
				t.Fatalf("after the header read %q, %v", got, err)
			}
		})
	}
}

func TestReadLocalKeepsTheBalancerAddress(t *testing.T) {
	s, c := pair(t)
	drip(t, c, v2(0, 0, nil, 0), 100, 0)
	pc, h, err := Read(s, 5*time.Second, nil)
	if err != nil || !h.Local {
		t.Fatalf("Read: %+v, %v", h, err)
	}
	if pc.RemoteAddr().String() != c.LocalAddr().String() {
		t.Fatalf("RemoteAddr %s, want the balancer's %s", pc.RemoteAddr(), c.LocalAddr())
	}
}

// TestReadReserves: reserve is asked for the header's buffer before it is
// made and before it grows, and its refusal ends the read with its error.
func TestReadReserves(t *testing.T) {
	refused := errors.New("no budget")
	for _, tc := range []struct {
		name    string
		send    []byte
		refuse  int // refuse the reservation of this size (0: none)
		want    []int
		wantErr error
	}{
		{"a v1 line", []byte("PROXY TCP4 127.0.0.2 127.0.0.1 1 2\r\n"), 0, []int{firstRead}, nil},
		{"a v2 header with a large TLV block", v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 1, 2), 1000), 0, []int{firstRead, MaxHeaderBytes}, nil},
		{"refused at once", v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 1, 2), 0), firstRead, []int{firstRead}, refused},
		{"refused growing", v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 1, 2), 1000), MaxHeaderBytes, []int{firstRead, MaxHeaderBytes}, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := pair(t)
			drip(t, c, tc.send, 1<<20, 0)
			var got []int
			_, _, err := Read(s, 5*time.Second, func(total int) error {
				got = append(got, total)
				if total == tc.refuse {
					return refused
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Read: %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("reserved %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadRefuses: each is refused within the timeout, and having read at
// most what the refusal needed.
func TestReadRefuses(t *testing.T) {
	const timeout = 300 * time.Millisecond
	huge := v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 1, 2), 65535-12)
	for _, tc := range []struct {
		name  string
		send  []byte
		size  int
		pause time.Duration
		want  error
	}{
		{"nothing sent", nil, 1, 0, ErrTimeout},
		{"a header that never completes", v2(1, 0x11, inet4("127.0.0.2", "127.0.0.1", 1, 2), 0)[:20], 1, 10 * time.Millisecond, ErrTimeout},
		{"a drip slower than the timeout", []byte("PROXY TCP4 127.0.0.2 127.0.0.1 1 2\r\n"), 1, 50 * time.Millisecond, ErrTimeout},
		{"a 65535-byte TLV block", huge, 1 << 20, 0, ErrTooLarge},
		{"a v1 line without CRLF", []byte("PROXY TCP4 127.0.0.2 127.0.0.1 1 2" + string(bytes.Repeat([]byte(" "), 100))), 1 << 20, 0, ErrInvalid},
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), 1 << 20, 0, ErrMissing},
		{"a Kafka request", []byte{0, 0, 0, 10, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0}, 1 << 20, 0, ErrMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := pair(t)
			if tc.send != nil {
				drip(t, c, tc.send, tc.size, tc.pause)
			}
			start := time.Now()
			_, _, err := Read(s, timeout, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read: %v, want %v", err, tc.want)
			}
			if took := time.Since(start); took > timeout+time.Second {
				t.Fatalf("refused after %v, timeout %v", took, timeout)
			}
		})
	}
}

func TestUntrusted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		send    []byte
		refused bool
	}{
		{"a v2 header", v2(1, 0x11, inet4("10.9.9.9", "127.0.0.1", 1, 2), 0), true},
		{"a v1 header a byte at a time", []byte("PROXY TCP4 10.9.9.9 127.0.0.1 1 2\r\n"), true},
		{"a Kafka request", []byte{0, 0, 0, 4, 0, 18, 0, 3}, false},
		{"a TLS client hello", []byte{0x16, 3, 1, 0, 4, 1, 2, 3, 4}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := pair(t)
			size := 1 << 20
			if tc.name == "a v1 header a byte at a time" {
				size = 1
			}
			drip(t, c, tc.send, size, time.Millisecond)
			var refusals []error
			u := Untrusted(s, func(err error) { refusals = append(refusals, err) })
			_ = u.SetReadDeadline(time.Now().Add(5 * time.Second))
			got := make([]byte, len(tc.send))
			_, err := io.ReadFull(u, got)
			if tc.refused {
				if !errors.Is(err, ErrUntrusted) || len(refusals) != 1 {
					t.Fatalf("read %v, refusals %v; want ErrUntrusted once", err, refusals)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.send) || len(refusals) != 0 {
				t.Fatalf("read %x, %v, refusals %v; want %x", got, err, refusals, tc.send)
			}
			if u.RemoteAddr().String() != c.LocalAddr().String() {
				t.Fatalf("RemoteAddr %s, want %s", u.RemoteAddr(), c.LocalAddr())
			}
		})
	}
}

func TestPolicyTrusted(t *testing.T) {
	p := Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	for addr, want := range map[string]bool{
		"10.1.2.3:1": true, "[::ffff:10.1.2.3]:1": true, "[fd00::5]:1": true, "11.0.0.1:1": false, "[fe80::1]:2": false,
	} {
		a := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))
		if got := p.Trusted(a); got != want {
			t.Errorf("Trusted(%s) = %v, want %v", addr, got, want)
		}
	}
	if (Policy{}).On() || !p.On() {
		t.Error("On: zero policy on, or set policy off")
	}
}
