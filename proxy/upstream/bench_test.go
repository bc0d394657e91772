package upstream

import (
	"bufio"
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

// echoBroker answers every request at once with a 16-byte body, without
// decoding it, so that a benchmark measures the pool rather than the fake.
func echoBroker(b *testing.B) string {
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
			wg.Go(func() { serveEcho(nc) })
		}
	})
	return ln.Addr().String()
}

func serveEcho(nc net.Conn) {
	br, bw := bufio.NewReader(nc), bufio.NewWriter(nc)
	hello := kmsg.NewPtrApiVersionsResponse()
	hello.Version = 3
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
