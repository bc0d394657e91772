package apis

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
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
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		h, body, flexible, err := parseHeader(frame)
		if err != nil {
			t.Logf("conn %d: %v", id, err)
			return
		}
		reply, err := d.Begin(ctx, id, h, body).Finish(ctx)
		if err != nil {
			t.Logf("conn %d: closing: %v", id, err)
			return
		}
		if reply.NoResponse {
			continue
		}
		out := binary.BigEndian.AppendUint32(nil, 0)
		out = binary.BigEndian.AppendUint32(out, uint32(h.CorrelationID))
		if flexible && h.Key != int16(kmsg.ApiVersions) { // ApiVersions answers with header v0
			out = append(out, 0)
		}
		out = append(out, replyBytes(reply)...)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func parseHeader(b []byte) (Header, []byte, bool, error) {
	if len(b) < 10 {
		return Header{}, nil, false, errors.New("short header")
	}
	h := Header{
		Key:           int16(binary.BigEndian.Uint16(b)),
		Version:       int16(binary.BigEndian.Uint16(b[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(b[4:])),
	}
	n := int(int16(binary.BigEndian.Uint16(b[8:])))
	b = b[10:]
	if n > 0 {
		if n > len(b) {
			return h, nil, false, errors.New("short client id")
		}
		id := string(b[:n])
		h.ClientID = &id
		b = b[n:]
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, false, errors.New("unknown api key " + strconv.Itoa(int(h.Key)))
	}
	req.SetVersion(h.Version)
	flexible := req.IsFlexible()
	if flexible { // request header v2: tagged fields
		count, m := binary.Uvarint(b)
		if m <= 0 {
			return h, nil, false, errors.New("bad tag count")
		}
		b = b[m:]
		for range count {
			_, m1 := binary.Uvarint(b)
			if m1 <= 0 {
				return h, nil, false, errors.New("bad tag")
			}
			size, m2 := binary.Uvarint(b[m1:])
			if m2 <= 0 || int(size) > len(b[m1+m2:]) {
				return h, nil, false, errors.New("bad tag size")
			}
			b = b[m1+m2+int(size):]
		}
	}
	return h, b, flexible, nil
}
