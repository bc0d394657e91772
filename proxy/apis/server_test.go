package apis

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
)

// testServer frames the Kafka protocol on 127.0.0.1 around a Dispatcher,
// one request at a time per connection: just enough of package proxy for
// real clients to talk to the dispatcher in tests.
type testServer struct {
	ctx    context.Context // ends every call when the server stops
	cancel context.CancelFunc
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// startServer listens first, so that the dispatcher can advertise the
// listener's address, then serves the dispatcher newD returns.
func startServer(t *testing.T, newD func(host string, port int32) *Dispatcher) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	d := newD(host, int32(port))
	s := &testServer{ln: ln, conns: map[net.Conn]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for id := uint64(1); ; id++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(t, d, id, c)
			}()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) stop() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *testServer) serve(t *testing.T, d *Dispatcher, id uint64, c net.Conn) {
	defer c.Close()
	ctx := s.ctx
	r := bufio.NewReader(c)
	flex := kwire.NewFlexTable()
	for {
		f, err := kwire.ReadFrame(r, 8, 1<<30, nil)
		if err != nil {
			return
		}
		frame := *f
		kh, err := kwire.ParseRequestHeader(frame, flex)
		if err != nil {
			t.Logf("conn %d: %v", id, err)
			return
		}
		h := Header{Key: kh.Key, Version: kh.Version, CorrelationID: kh.Corr}
		if !kh.NullClientID {
			cid := string(kh.ClientID)
			h.ClientID = &cid
		}
		body := frame[kh.BodyOff:]
		reply, err := d.Begin(ctx, id, h, body).Finish(ctx)
		if err != nil {
			t.Logf("conn %d: closing: %v", id, err)
			return
		}
		if reply.NoResponse {
			continue
		}
		out := kwire.AppendResponseHeader(nil, h.CorrelationID, kwire.ResponseHeaderFlexible(h.Key, kh.Flexible))
		out = append(out, replyBytes(reply)...)
		kwire.FinishFrame(out)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
