package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/proxyproto"
)

// hostDispatcher answers every request at once with the client host the
// connection reports (ConnInfo.Client, what ACLs, zones and audit use).
type hostDispatcher struct{}

type hostCall struct{ host string }

func (hostDispatcher) Begin(ctx context.Context, _ uint64, _ apis.Header, _ []byte) call {
	return hostCall{apis.ConnInfoFrom(ctx).Client}
}

func (c hostCall) Finish(context.Context) (apis.Reply, error) {
	return apis.Reply{Body: []byte(c.host)}, nil
}

// startProxiedServer runs a server whose one listener trusts PROXY headers
// from 127.0.0.1 only.
func startProxiedServer(t *testing.T, lim Limits) (*Server, string) {
	t.Helper()
	return startPolicyServer(t, proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, lim, hostDispatcher{})
}

// startPolicyServer runs a server of d on one listener with policy p; it
// stops when the test ends.
func startPolicyServer(t testing.TB, p proxyproto.Policy, lim Limits, d dispatcher) (*Server, string) {
	t.Helper()
	lns, err := listener.Bind(context.Background(), []listener.Listener{{
		Name: "PLAINTEXT", Protocol: listener.Plaintext, Addr: "127.0.0.1:0", ProxyProtocol: p,
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(Config{Limits: lim, Registry: prometheus.NewRegistry(), DrainTimeout: time.Second}, lns, deps{disp: d})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(3 * testWait):
			t.Errorf("Run did not return within %s", 3*testWait)
		}
	})
	return s, s.Addr()
}

// dialLocal connects to addr from local address from (127.0.0.x).
func dialLocal(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: testWait}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

func v2Header(src string, port uint16, tlvLen int) []byte {
	a := netip.MustParseAddr(src).As4()
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11")
	b = binary.BigEndian.AppendUint16(b, uint16(12+tlvLen))
	b = append(b, a[:]...)
	b = append(b, 127, 0, 0, 1)
	b = binary.BigEndian.AppendUint16(b, port)
	b = binary.BigEndian.AppendUint16(b, 9092)
	return append(b, make([]byte, tlvLen)...)
}

// apiVersionsFrame is an ApiVersions v0 request, correlation id corr.
func apiVersionsFrame(corr int32) []byte {
	id := "t"
	f := kwire.AppendRequestHeader(nil, 18, 0, corr, &id, false)
	kwire.FinishFrame(f)
	return f
}

// askHost sends a request on nc and returns the host the proxy answered
// with.
func askHost(t *testing.T, nc net.Conn, br *bufio.Reader, prefix []byte) string {
	t.Helper()
	if _, err := nc.Write(append(append([]byte(nil), prefix...), apiVersionsFrame(7)...)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(testWait))
	f, err := kwire.ReadFrame(br, 4, 1<<20, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return string((*f)[4:])
}

// TestProxiedConnectionsServeTheClientAddress: a trusted balancer's header
// names the client every consumer of the address sees; an untrusted source
// without one is served as itself; v2 LOCAL keeps the balancer's address;
// per-IP connection limits count the clients, not the balancer.
func TestProxiedConnectionsServeTheClientAddress(t *testing.T) {
	_, addr := startProxiedServer(t, Limits{MaxConnectionsPerIP: 1})
	for _, tc := range []struct {
		name, from string
		prefix     []byte
		want       string
	}{
		{"v2 from the balancer", "127.0.0.1", v2Header("10.1.1.1", 4000, 30), "10.1.1.1"},
		{"v1 from the balancer", "127.0.0.1", []byte("PROXY TCP4 10.1.1.2 127.0.0.1 4001 9092\r\n"), "10.1.1.2"},
		{"v2 LOCAL from the balancer", "127.0.0.1", []byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"), "127.0.0.1"},
		{"a direct client", "127.0.0.2", nil, "127.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := dialLocal(t, tc.from, addr)
			if got := askHost(t, nc, bufio.NewReader(nc), tc.prefix); got != tc.want {
				t.Fatalf("proxy saw client %q, want %q", got, tc.want)
			}
		})
	}
	// One connection per IP: two clients behind the balancer both get one.
	a, b := dialLocal(t, "127.0.0.1", addr), dialLocal(t, "127.0.0.1", addr)
	if got := askHost(t, a, bufio.NewReader(a), v2Header("10.2.0.1", 1, 0)); got != "10.2.0.1" {
		t.Fatalf("first client seen as %q", got)
	}
	if got := askHost(t, b, bufio.NewReader(b), v2Header("10.2.0.2", 1, 0)); got != "10.2.0.2" {
		t.Fatalf("second client behind the same balancer seen as %q", got)
	}
	c := dialLocal(t, "127.0.0.1", addr)
	_, _ = c.Write(v2Header("10.2.0.1", 2, 0))
	expectClosedWithin(t, c, testWait)
}

// expectClosedWithin fails unless the proxy closes nc within d.
func expectClosedWithin(t *testing.T, nc net.Conn, d time.Duration) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	for {
		_, err := nc.Read(b[:])
		if err == nil {
			continue // an answer to something sent before: read past it
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection still open after %s", d)
		}
		return
	}
}

// TestProxiedRefusals: each is closed within the read timeout, counted by
// reason, and leaves no goroutine behind.
func TestProxiedRefusals(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s, addr := startProxiedServer(t, Limits{RequestReadTimeout: timeout})
	for _, tc := range []struct {
		name, from string
		send       []byte
		drip       time.Duration // between bytes (0: one write)
		reason     string
	}{
		{"a header from an untrusted source", "127.0.0.2", v2Header("10.1.1.1", 1, 0), 0, "proxy_header_untrusted"},
		{"a v1 header from an untrusted source", "127.0.0.2", []byte("PROXY TCP4 10.1.1.1 127.0.0.1 1 2\r\n"), 0, "proxy_header_untrusted"},
		{"the balancer without a header", "127.0.0.1", apiVersionsFrame(1), 0, "proxy_header_missing"},
		{"the balancer sending nothing", "127.0.0.1", nil, 0, "proxy_header_timeout"},
		{"a header dripped slower than the timeout", "127.0.0.1", v2Header("10.1.1.1", 1, 0), 40 * time.Millisecond, "proxy_header_timeout"},
		{"a 65535-byte TLV block", "127.0.0.1", v2Header("10.1.1.1", 1, 65535-12), 0, "proxy_header_too_large"},
		{"a v1 line without CRLF", "127.0.0.1", []byte("PROXY TCP4 10.1.1.1 127.0.0.1 1 2" + strings.Repeat(" ", 100)), 0, "proxy_header_invalid"},
		{"garbage", "127.0.0.1", []byte("\x16\x03\x01garbage garbage"), 0, "proxy_header_missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.ToFloat64(s.g.badInput.WithLabelValues(tc.reason))
			nc := dialLocal(t, tc.from, addr)
			start := time.Now()
			stop := make(chan struct{})
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				for i := 0; i < len(tc.send); {
					n := len(tc.send) - i
					if tc.drip > 0 {
						n = 1
					}
					if _, err := nc.Write(tc.send[i : i+n]); err != nil {
						return
					}
					i += n
					select {
					case <-stop:
						return
					case <-time.After(tc.drip):
					}
				}
			}()
			expectClosedWithin(t, nc, timeout+testWait)
			close(stop)
			<-sent
			if took := time.Since(start); took > timeout+time.Second {
				t.Errorf("closed after %v; the read timeout is %v", took, timeout)
			}
			waitFor(t, func() bool { return testutil.ToFloat64(s.g.badInput.WithLabelValues(tc.reason)) == before+1 },
				"kproxy_bad_input_total{reason="+tc.reason+"} counted once")
		})
	}
	waitNoConnGoroutines(t)
}

// waitNoConnGoroutines waits until no goroutine serves a client connection
// or reads a PROXY header.
func waitNoConnGoroutines(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(testWait)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "proxy.(*clientConn)") && !strings.Contains(stacks, "proxy.(*Server).startProxied") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection goroutines left %s after the clients:\n%s", testWait, stacks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProxiedHealthCheckNotCounted: a balancer's TCP health check (connect,
// close, nothing sent) is not bad input.
func TestProxiedHealthCheckNotCounted(t *testing.T) {
	s, addr := startProxiedServer(t, Limits{})
	nc := dialLocal(t, "127.0.0.1", addr)
	nc.Close()
	// A connection after it, served, shows the first was handled.
	next := dialLocal(t, "127.0.0.1", addr)
	if got := askHost(t, next, bufio.NewReader(next), v2Header("10.4.4.4", 1, 0)); got != "10.4.4.4" {
		t.Fatalf("client seen as %q", got)
	}
	waitNoHeaderReads(t)
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !strings.HasPrefix(l.GetValue(), "proxy_header") {
					continue
				}
				seen[l.GetValue()] = true
				if m.GetCounter().GetValue() > 0 {
					t.Errorf("%s{%s=%s} = %v after a health check", mf.GetName(), l.GetName(), l.GetValue(), m.GetCounter().GetValue())
				}
			}
		}
	}
	for _, r := range proxyproto.Reasons() {
		if !seen[r] {
			t.Errorf("kproxy_bad_input_total{reason=%q} not exported at zero", r)
		}
	}
}

// waitNoHeaderReads waits until no goroutine reads a PROXY header.
func waitNoHeaderReads(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(testWait)
	for strings.Contains(string(buf[:runtime.Stack(buf, true)]), "proxy.(*Server).startProxied") {
		if time.Now().After(deadline) {
			t.Fatalf("a PROXY header read still running after %s", testWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProxiedHeaderSplitOverSmallWrites: a header that arrives a few bytes
// at a time is accepted when it is whole within the read timeout.
func TestProxiedHeaderSplitOverSmallWrites(t *testing.T) {
	_, addr := startProxiedServer(t, Limits{RequestReadTimeout: 2 * time.Second})
	nc := dialLocal(t, "127.0.0.1", addr)
	hdr := v2Header("10.3.3.3", 1, 20)
	for i := 0; i < len(hdr); i += 3 {
		if _, err := nc.Write(hdr[i:min(i+3, len(hdr))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := askHost(t, nc, bufio.NewReader(nc), nil); got != "10.3.3.3" {
		t.Fatalf("client seen as %q", got)
	}
}

// headerHeld is what unfinished frames of ip hold, and of everyone.
func headerHeld(g *guard, ip string) (held, all int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.partial[ip]; s != nil {
		held = s.held
	}
	return held, g.allShare.held
}

// ask sends rest (the end of a header, or nothing) and an ApiVersions on
// nc, and returns the client host the proxy answered with, or the error of
// a closed connection.
func ask(nc net.Conn, rest []byte) (string, error) {
	if _, err := nc.Write(append(append([]byte(nil), rest...), apiVersionsFrame(7)...)); err != nil {
		return "", err
	}
	_ = nc.SetReadDeadline(time.Now().Add(testWait))
	f, err := kwire.ReadFrame(bufio.NewReader(nc), 4, 1<<20, nil)
	if err != nil {
		return "", err
	}
	return string((*f)[4:]), nil
}

// TestProxiedHeaderHoldsBudget: trusted connections that each send part of
// a 3 KiB header hold its 4 KiB buffer in the balancer's share of the
// request budget; past a share the largest holder is cut (partial_ip_share)
// or, when the asker's own connection share is too small, the asker is
// refused (proxy_header_budget). A direct client is answered meanwhile;
// once the headers complete or their connections close, nothing is held.
// Before, a header held no budget at all.
func TestProxiedHeaderHoldsBudget(t *testing.T) {
	const buf, perIP = proxyproto.MaxHeaderBytes, 4 * proxyproto.MaxHeaderBytes
	for _, tc := range []struct {
		name   string
		lim    Limits
		conns  int
		held   int64  // by the balancer's address once every part is in
		reason string // of the cuts or refusals
		closed int    // connections cut or refused
	}{
		{"headers within the balancer's share", Limits{MaxPartialFrameBytesPerIP: perIP}, 3, 3 * buf, badIPShare, 0},
		{"one header past the balancer's share", Limits{MaxPartialFrameBytesPerIP: perIP}, 5, perIP, badIPShare, 1},
		{"headers past their connection's share", Limits{MaxPartialFrameBytesPerConn: 1024}, 2, 0, badProxyBudget, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lim.RequestReadTimeout = time.Hour
			s, addr := startProxiedServer(t, tc.lim)
			var conns []net.Conn
			var rests [][]byte
			for i := range tc.conns {
				hdr := v2Header(fmt.Sprintf("10.7.0.%d", i+1), 1, 3000)
				nc := dialLocal(t, "127.0.0.1", addr)
				if _, err := nc.Write(hdr[:300]); err != nil { // past the first 256-byte read
					t.Fatal(err)
				}
				conns, rests = append(conns, nc), append(rests, hdr[300:])
			}
			counted := func() float64 { return testutil.ToFloat64(s.g.badInput.WithLabelValues(tc.reason)) }
			waitFor(t, func() bool {
				held, all := headerHeld(s.g, "127.0.0.1")
				return held == tc.held && all == tc.held && counted() == float64(tc.closed) &&
					testutil.ToFloat64(s.g.queued) == float64(tc.held)
			}, fmt.Sprintf("%d bytes held by the headers, %d %s", tc.held, tc.closed, tc.reason))

			direct := dialLocal(t, "127.0.0.2", addr)
			if host, err := ask(direct, nil); err != nil || host != "127.0.0.2" {
				t.Fatalf("a direct client beside the headers: %q, %v", host, err)
			}
			answered := 0
			for i, nc := range conns {
				if host, err := ask(nc, rests[i]); err == nil {
					if want := fmt.Sprintf("10.7.0.%d", i+1); host != want {
						t.Fatalf("client seen as %q, want %q", host, want)
					}
					answered++
				}
			}
			if answered != tc.conns-tc.closed {
				t.Fatalf("%d of %d connections answered, want %d", answered, tc.conns, tc.conns-tc.closed)
			}
			waitFor(t, func() bool {
				held, all := headerHeld(s.g, "127.0.0.1")
				return held == 0 && all == 0 && testutil.ToFloat64(s.g.queued) == 0
			}, "no budget held once the headers are read or refused")
			for _, nc := range append(conns, direct) {
				nc.Close()
			}
			waitNoConnGoroutines(t)
			if held, all := headerHeld(s.g, "127.0.0.1"); held != 0 || all != 0 || testutil.ToFloat64(s.g.queued) != 0 {
				t.Fatalf("after the connections closed: %d bytes held by the balancer, %d by all, %v queued", held, all, testutil.ToFloat64(s.g.queued))
			}
		})
	}
}

// TestProxiedHeaderCountsTowardMaxConnections: connections still sending
// their header count against max-connections (not against the balancer's
// per-IP limit); once read, each counts as its client.
func TestProxiedHeaderCountsTowardMaxConnections(t *testing.T) {
	s, addr := startProxiedServer(t, Limits{MaxConnections: 2, MaxConnectionsPerIP: 1, RequestReadTimeout: time.Hour})
	hdrs := [][]byte{v2Header("10.8.0.1", 1, 0), v2Header("10.8.0.2", 1, 0)}
	var conns []net.Conn
	for _, hdr := range hdrs {
		nc := dialLocal(t, "127.0.0.1", addr)
		if _, err := nc.Write(hdr[:10]); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	waitFor(t, func() bool { held, _ := headerHeld(s.g, "127.0.0.1"); return held == 2*256 }, "two headers arriving") // each its first 256-byte read
	third := dialLocal(t, "127.0.0.1", addr)
	expectClosedWithin(t, third, testWait)
	if v := testutil.ToFloat64(s.g.refused.WithLabelValues(refusedMax)); v != 1 {
		t.Fatalf("%s count = %v with two headers arriving, want 1", refusedMax, v)
	}
	for i, nc := range conns {
		if host, err := ask(nc, hdrs[i][10:]); err != nil || host != fmt.Sprintf("10.8.0.%d", i+1) {
			t.Fatalf("connection %d: %q, %v", i, host, err)
		}
	}
}
