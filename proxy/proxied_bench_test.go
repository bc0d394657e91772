package proxy

import (
	"bufio"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/proxyproto"
)

// BenchmarkProxyProtocol is BenchmarkPipelined's load (windows of 32
// requests on one connection, answered at once) on two servers side by
// side, one with the PROXY protocol off and one with it on, alternating in
// rounds of 512 requests (each first in every other round) so that a
// loaded machine's drift falls on both:
// after the header a connection must cost what it did (issue 29: on at
// least 0.98x off). It reports on/off, the median over round pairs of the
// throughput with the protocol on over the throughput with it off.
//
//	taskset -c 1 go test -run '^$' -bench BenchmarkProxyProtocol -benchtime 200000x ./proxy/
func BenchmarkProxyProtocol(b *testing.B) {
	_, offAddr := startPolicyServer(b, proxyproto.Policy{}, Limits{}, newFakeDispatcher(false))
	_, onAddr := startPolicyServer(b, proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, Limits{}, newFakeDispatcher(false))
	off, on := benchConn(b, offAddr, nil), benchConn(b, onAddr, v2Header("10.1.1.1", 4000, 0))
	const round = 512
	var offTime, onTime time.Duration
	var ratios []float64 // per round pair: a burst of load falls on both of it
	b.ReportAllocs()
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; done, r = done+round, r+1 {
		n := min(round, b.N-done)
		var offT, onT time.Duration
		if r%2 == 0 { // each goes first in every other round
			offT, onT = off.run(b, n), on.run(b, n)
		} else {
			onT, offT = on.run(b, n), off.run(b, n)
		}
		offTime, onTime = offTime+offT, onTime+onT
		ratios = append(ratios, float64(offT)/float64(onT))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "on/off")
	b.ReportMetric(float64(offTime.Nanoseconds())/float64(b.N), "off-ns/req")
	b.ReportMetric(float64(onTime.Nanoseconds())/float64(b.N), "on-ns/req")
}

// benchClient pipelines requests on one connection.
type benchClient struct {
	nc    net.Conn
	br    *bufio.Reader
	frame []byte
	burst []byte
	corr  int32
}

// benchConn dials addr and sends header (nil: none) first.
func benchConn(b *testing.B, addr string, header []byte) *benchClient {
	b.Helper()
	nc, err := net.DialTimeout("tcp", addr, testWait)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(header); err != nil {
		b.Fatal(err)
	}
	id := "test"
	frame := kwire.AppendRequestHeader(nil, 3, 4, 0, &id, false) // Metadata v4
	frame = append(frame, make([]byte, 100)...)
	kwire.FinishFrame(frame)
	return &benchClient{nc: nc, br: bufio.NewReader(nc), frame: frame}
}

// run writes n requests in windows of 32, reads every answer and returns
// how long that took.
func (c *benchClient) run(b *testing.B, n int) time.Duration {
	const window = 32
	start := time.Now()
	_ = c.nc.SetReadDeadline(start.Add(testWait))
	for done := 0; done < n; {
		w := min(window, n-done)
		c.burst = c.burst[:0]
		for i := range w {
			binary.BigEndian.PutUint32(c.frame[kwire.CorrOffset:], uint32(c.corr+int32(i)))
			c.burst = append(c.burst, c.frame...)
		}
		if _, err := c.nc.Write(c.burst); err != nil {
			b.Fatal(err)
		}
		for i := range w {
			f, err := kwire.ReadFrame(c.br, 4, 1<<30, nil)
			if err != nil {
				b.Fatalf("read answer: %v", err)
			}
			if corr := int32(binary.BigEndian.Uint32(*f)); corr != c.corr+int32(i) {
				b.Fatalf("got %d, want %d", corr, c.corr+int32(i))
			}
		}
		c.corr += int32(w)
		done += w
	}
	return time.Since(start)
}
