package upstream

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
)

// echoBroker answers every request at once with a 16-byte body, without
// decoding it, so that a benchmark measures the pool rather than the fake.
func echoBroker(b *testing.B) string { return echoBrokerShaped(b, false) }

// echoBrokerShaped is echoBroker; unordered makes it advertise
// layout.UnorderedResponsesFeature (it answers in order either way).
func echoBrokerShaped(b *testing.B, unordered bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			b.Cleanup(func() { nc.Close() })
			wg.Go(func() { serveEcho(nc, unordered) })
		}
	})
	return ln.Addr().String()
}

func serveEcho(nc net.Conn, unordered bool) {
	br, bw := bufio.NewReader(nc), bufio.NewWriter(nc)
	hello := kmsg.NewPtrApiVersionsResponse()
	hello.Version = 3
	if unordered {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = layout.UnorderedResponsesFeature, 1, 1
		hello.SupportedFeatures = append(hello.SupportedFeatures, f)
	}
	helloBody := hello.AppendTo(nil)
	var pool kwire.BufPool
	var hdr [kwire.MaxResponseHeader]byte
	for {
		frame, err := kwire.ReadFrame(br, 8, 1<<30, &pool)
		if err != nil {
			return
		}
		key, corr := int16(binary.BigEndian.Uint16(*frame)), int32(binary.BigEndian.Uint32((*frame)[4:]))
		pool.Put(frame)
		body := make([]byte, 17) // tag byte + 16
		if key == keyApiVersions {
			body = helloBody
		}
		bw.Write(hdr[:kwire.PutResponseHeader(&hdr, corr, false, len(body))])
		bw.Write(body)
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
	}
}

// BenchmarkSendWait measures a forwarded request's round trip through one
// pooled connection with 64 requests in flight.
func BenchmarkSendWait(b *testing.B) {
	addr := echoBroker(b)
	p := NewPool(Config{Resolve: func(int32) (string, bool) { return addr, true }, ConnsPerBroker: 1})
	defer p.Close()
	body := metadataReq(12, "bench")
	ctx := context.Background()
	const window = 64
	pends := make(chan interface {
		Wait(context.Context) ([]byte, error)
	}, window)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			if _, err := (<-pends).Wait(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		pend, err := p.Send(ctx, 1, 0, Request{Key: 3, Version: 12, Body: Raw(body)})
		if err != nil {
			b.Fatal(err)
		}
		pends <- pend
	}
	<-done
}

// BenchmarkSendWaitClients measures a request's round trip with 64 clients
// (affinities) each waiting for its answer before sending the next, as 64
// producers with one request in flight do: on-demand connections to a
// broker that answers in order, or 4 shared ones to one that says it
// answers out of order.
func BenchmarkSendWaitClients(b *testing.B) {
	for _, tc := range []struct {
		name      string
		unordered bool
	}{{"in-order", false}, {"unordered", true}} {
		b.Run(tc.name, func(b *testing.B) {
			addr := echoBrokerShaped(b, tc.unordered)
			p := NewPool(Config{Resolve: func(int32) (string, bool) { return addr, true }})
			defer p.Close()
			body := metadataReq(12, "bench")
			ctx := context.Background()
			var next atomic.Uint64
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				aff := next.Add(1)
				for pb.Next() {
					pend, err := p.Send(ctx, 1, aff, Request{Key: 3, Version: 12, Body: Raw(body)})
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := pend.Wait(ctx); err != nil {
						b.Error(err)
						return
					}
					pend.Release()
				}
			})
		})
	}
}

// BenchmarkSendWaitOneClient measures one client's requests one after the
// other on an on-demand connection to a broker that answers in order, the
// shape of a producer through a proxy that is not busy: each request's
// wakes then cost the most. It reports the process's CPU time per request
// (user+system, the echo broker's included) beside the wall time.
func BenchmarkSendWaitOneClient(b *testing.B) {
	addr := echoBroker(b)
	p := NewPool(Config{Resolve: func(int32) (string, bool) { return addr, true }})
	defer p.Close()
	body := metadataReq(12, "bench")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for range b.N {
		pend, err := p.Send(ctx, 1, 1, Request{Key: 3, Version: 12, Body: Raw(body)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pend.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		pend.Release()
	}
	b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user+system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
