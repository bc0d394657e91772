package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/proxy/admin"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/routing"
)

const testWait = 5 * time.Second

// fakeDispatcher records every Begin. By default a call answers at once
// with body "r<corr>"; with hold set, each call waits for the test to
// release it.
type fakeDispatcher struct {
	hold   bool
	begun  chan *fakeCall
	mu     sync.Mutex
	nBegun int
}

type fakeCall struct {
	h       apis.Header
	body    []byte // a copy of what Begin got
	orig    []byte // what Begin got: valid until Finish returns
	release chan fakeResult
	d       *fakeDispatcher
}

type fakeResult struct {
	reply apis.Reply
	err   error
}

func newFakeDispatcher(hold bool) *fakeDispatcher {
	return &fakeDispatcher{hold: hold, begun: make(chan *fakeCall, 1024)}
}

func (d *fakeDispatcher) Begin(_ context.Context, _ uint64, h apis.Header, body []byte) call {
	c := &fakeCall{h: h, body: append([]byte(nil), body...), orig: body, release: make(chan fakeResult, 1), d: d}
	d.mu.Lock()
	d.nBegun++
	d.mu.Unlock()
	if d.hold {
		d.begun <- c
	} else {
		select { // calls answer themselves: recording them is best effort
		case d.begun <- c:
		default:
		}
	}
	return c
}

func (d *fakeDispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nBegun
}

func (c *fakeCall) defaultReply() apis.Reply {
	if c.h.Key == 0 && len(c.body) > 0 && c.body[0] == 'z' { // our tests' acks=0 marker
		return apis.Reply{NoResponse: true}
	}
	return apis.Reply{Body: fmt.Appendf(nil, "r%d", c.h.CorrelationID)}
}

func (c *fakeCall) Finish(ctx context.Context) (apis.Reply, error) {
	if !c.d.hold {
		return c.defaultReply(), nil
	}
	select {
	case r := <-c.release:
		return r.reply, r.err
	case <-ctx.Done():
		return apis.Reply{}, ctx.Err()
	}
}

func (c *fakeCall) answer() { c.release <- fakeResult{reply: c.defaultReply()} }

func (d *fakeDispatcher) next(t *testing.T) *fakeCall {
	t.Helper()
	select {
	case c := <-d.begun:
		return c
	case <-time.After(testWait):
		t.Fatalf("no request reached the dispatcher within %s", testWait)
		return nil
	}
}

type testServer struct {
	*Server
	admin  *admin.Endpoint
	routes *routing.Table
	synced atomic.Bool
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

// AdminAddr is the bound address of the admin endpoint beside the server.
func (ts *testServer) AdminAddr() string { return ts.admin.Addr() }

// startServer runs a server with a fake dispatcher, and beside it an admin
// endpoint as the assembly wires one; it is stopped (and checked to return
// nil) when the test ends, unless the test stops it.
func startServer(t testing.TB, cfg Config, d dispatcher) *testServer {
	t.Helper()
	return startServerWith(t, cfg, d, nil)
}

// startServerWith is startServer with deps changed by edit (if not nil)
// before the server is built.
func startServerWith(t testing.TB, cfg Config, d dispatcher, edit func(*deps)) *testServer {
	t.Helper()
	return startServerAdmin(t, cfg, d, edit, nil)
}

// startServerAdmin is startServerWith with the admin endpoint's
// configuration changed by editAdmin (if not nil) before it is built.
func startServerAdmin(t testing.TB, cfg Config, d dispatcher, edit func(*deps), editAdmin func(*admin.Config)) *testServer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.setDefaults()
	lns, err := listener.Bind(context.Background(), []listener.Listener{{Name: "PLAINTEXT", Protocol: listener.Plaintext, Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{routes: routing.NewTable(), done: make(chan error, 1), reg: cfg.Registry}
	dp := deps{disp: d}
	acfg := admin.Config{
		Routes: ts.routes, Registry: cfg.Registry, Logger: cfg.Logger,
		Status: func() leasewatch.Status {
			return leasewatch.Status{Synced: ts.synced.Load(), Age: time.Second}
		},
	}
	if edit != nil {
		edit(&dp)
	}
	if editAdmin != nil {
		editAdmin(&acfg)
	}
	ts.Server = newServer(cfg, lns, dp)
	acfg.Draining = ts.Server.Draining
	if ts.admin, err = admin.New(acfg, adminLn); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() {
		actx, stopAdmin := context.WithCancel(context.Background())
		adone := make(chan error, 1)
		go func() { adone <- ts.admin.Run(actx) }()
		err := ts.Run(ctx)
		stopAdmin() // after the drain, as the assembly stops it
		err = errors.Join(err, <-adone)
		ts.done <- err
	}()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	ts.cancel()
	select {
	case err, ok := <-ts.done:
		if ok && err != nil {
			t.Errorf("Run: %v", err)
		}
		if ok {
			close(ts.done)
		}
	case <-time.After(3 * testWait):
		t.Fatalf("Run did not return within %s of shutdown", 3*testWait)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// testClient speaks raw Kafka framing to the proxy.
type testClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dial(t testing.TB, ts *testServer) *testClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", ts.Addr(), testWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes a request frame with a v1/v2 header as kmsg says; payload is
// the opaque body.
func (c *testClient) send(key, version int16, corr int32, payload []byte) {
	c.t.Helper()
	flexible := false
	if req := kmsg.RequestForKey(key); req != nil {
		req.SetVersion(version)
		flexible = req.IsFlexible()
	}
	id := "test"
	frame := kwire.AppendRequestHeader(nil, key, version, corr, &id, flexible)
	frame = append(frame, payload...)
	kwire.FinishFrame(frame)
	c.raw(frame)
}

func (c *testClient) raw(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next response's correlation id and everything after it
// (the tag byte of a flexible header included).
func (c *testClient) read() (int32, []byte) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(testWait))
	f, err := kwire.ReadFrame(c.br, 4, 1<<30, nil)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	buf := *f
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}

func (c *testClient) expectClosed() {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(testWait))
	_, err := c.br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("connection still open after %s", testWait)
	}
	if err == nil {
		c.t.Fatal("got bytes, want the connection closed")
	}
}
