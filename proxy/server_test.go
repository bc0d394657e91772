package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/proxy/admin"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/routing"
)

// TestPipelinedResponsesKeepRequestOrder finishes calls in reverse order;
// the client must still get responses in request order.
func TestPipelinedResponsesKeepRequestOrder(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{}, d)
	c := dial(t, ts)
	const n = 10
	for i := range n {
		c.send(3, 4, int32(100+i), nil) // Metadata v4
	}
	calls := make([]*fakeCall, n)
	for i := range calls {
		calls[i] = d.next(t)
		if calls[i].h.CorrelationID != int32(100+i) {
			t.Fatalf("Begin %d got correlation id %d: calls began out of order", i, calls[i].h.CorrelationID)
		}
		if calls[i].h.ClientID == nil || *calls[i].h.ClientID != "test" {
			t.Fatalf("client id %v", calls[i].h.ClientID)
		}
	}
	for i := n - 1; i >= 0; i-- {
		calls[i].answer()
	}
	for i := range n {
		corr, body := c.read()
		if corr != int32(100+i) || string(body) != fmt.Sprintf("r%d", corr) {
			t.Fatalf("response %d: corr %d body %q", i, corr, body)
		}
	}
}

func TestResponseHeaderVersions(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{}, d)
	c := dial(t, ts)
	cases := []struct {
		name         string
		key, version int16
		want         string // bytes after the correlation id
	}{
		{"metadata v4: header v0", 3, 4, "r1"},
		{"metadata v12: header v1 with empty tags", 3, 12, "\x00r2"},
		{"api versions v3: always header v0", 18, 3, "r3"},
		{"api versions v99: unknown version still answered with header v0", 18, 99, "r4"},
	}
	for i, tc := range cases {
		corr := int32(i + 1)
		c.send(tc.key, tc.version, corr, []byte("payload"))
		call := d.next(t)
		if call.h.Key != tc.key || call.h.Version != tc.version {
			t.Fatalf("%s: dispatcher got key %d v%d", tc.name, call.h.Key, call.h.Version)
		}
		if tc.version < 99 && string(call.body) != "payload" {
			t.Fatalf("%s: body %q, want the request body without the header", tc.name, call.body)
		}
		got, rest := c.read()
		if got != corr || string(rest) != tc.want {
			t.Fatalf("%s: response corr %d rest %q, want %d %q", tc.name, got, rest, corr, tc.want)
		}
	}
}

func TestAcksZeroProduceGetsNoResponse(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{MaxInFlightPerConn: 2}, d)
	c := dial(t, ts)
	c.send(3, 4, 1, nil)
	for i := range 5 { // more than the in-flight bound: skipped tickets must free it
		c.send(0, 9, int32(10+i), []byte("z")) // the fake answers NoResponse
	}
	c.send(3, 4, 2, nil)
	for _, want := range []int32{1, 2} {
		if corr, _ := c.read(); corr != want {
			t.Fatalf("got response %d, want %d (acks=0 produce must not be answered)", corr, want)
		}
	}
}

// TestBadFramesCloseOnlyTheirConnection sends each bad frame on its own
// connection while another client keeps being served.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	d := newFakeDispatcher(false)
	ts := startServer(t, Config{MaxFrameBytes: 1 << 10}, d)
	good := dial(t, ts)
	cases := []struct {
		name  string
		frame []byte
	}{
		{"oversize", []byte{0, 0, 8, 0}},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xf0}},
		{"shorter than a header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"unknown key", []byte{0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}},
		{"unknown version", []byte{0, 0, 0, 10, 0, 3, 0x7f, 0, 0, 0, 0, 1, 0xff, 0xff}},
		{"client id past the end", []byte{0, 0, 0, 10, 0, 3, 0, 4, 0, 0, 0, 1, 0, 50}},
		{"bad header tags", []byte{0, 0, 0, 11, 0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0x80}},
	}
	for i, tc := range cases {
		bad := dial(t, ts)
		bad.raw(tc.frame)
		bad.expectClosed()
		good.send(3, 4, int32(i), nil)
		if corr, _ := good.read(); corr != int32(i) {
			t.Fatalf("%s: other client got response %d, want %d", tc.name, corr, i)
		}
	}
	if v := testutil.ToFloat64(ts.m.errors.WithLabelValues("Unknown", codeInvalidRequest)); v < 3 {
		t.Fatalf("invalid request count = %v", v)
	}
	if d.count() != len(cases) {
		t.Fatalf("dispatcher saw %d requests, want only the good client's %d", d.count(), len(cases))
	}
}

func TestFinishErrorClosesConnection(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{}, d)
	bad, good := dial(t, ts), dial(t, ts)
	bad.send(3, 4, 1, nil)
	d.next(t).release <- fakeResult{err: fmt.Errorf("cannot answer")}
	bad.expectClosed()
	good.send(3, 4, 2, nil)
	d.next(t).answer()
	if corr, _ := good.read(); corr != 2 {
		t.Fatalf("other client got %d", corr)
	}
}

// TestBackpressure checks that a connection with MaxInFlightPerConn
// requests outstanding stops reading until one is answered.
func TestBackpressure(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{MaxInFlightPerConn: 2}, d)
	c := dial(t, ts)
	for i := range 5 {
		c.send(3, 4, int32(i), nil)
	}
	first, second := d.next(t), d.next(t)
	select {
	case extra := <-d.begun:
		t.Fatalf("request %d began with 2 outstanding", extra.h.CorrelationID)
	case <-time.After(100 * time.Millisecond): // absence cannot be signalled: give the reader time to misbehave
	}
	first.answer()
	if corr, _ := c.read(); corr != 0 {
		t.Fatalf("got %d", corr)
	}
	third := d.next(t)
	if third.h.CorrelationID != 2 {
		t.Fatalf("third call is %d", third.h.CorrelationID)
	}
	second.answer()
	third.answer()
	for _, want := range []int32{1, 2} {
		if corr, _ := c.read(); corr != want {
			t.Fatalf("got %d, want %d", corr, want)
		}
	}
	for range 2 {
		d.next(t).answer()
	}
}

func TestDrainFinishesOutstandingRequests(t *testing.T) {
	before := runtime.NumGoroutine()
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{DrainTimeout: testWait}, d)
	c := dial(t, ts)
	c.send(3, 4, 7, nil)
	call := d.next(t)
	ts.cancel()
	waitFor(t, func() bool { return ts.draining.Load() }, "server draining")
	if _, err := net.DialTimeout("tcp", ts.Addr(), time.Second); err == nil {
		// The listener is closed once draining starts; a dial that still
		// succeeds must at least be closed at once.
		t.Log("dial succeeded during drain")
	}
	call.answer()
	if corr, _ := c.read(); corr != 7 {
		t.Fatalf("got %d", corr)
	}
	c.expectClosed()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		close(ts.done)
	case <-time.After(testWait):
		t.Fatal("Run did not return after the drain")
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before }, fmt.Sprintf("goroutines back to %d", before))
}

func TestDrainTimeoutClosesStuckConnections(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{DrainTimeout: 50 * time.Millisecond}, d)
	c := dial(t, ts)
	c.send(3, 4, 7, nil)
	d.next(t) // never answered: Finish returns when the proxy cancels it
	start := time.Now()
	ts.cancel()
	c.expectClosed()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		close(ts.done)
	case <-time.After(testWait):
		t.Fatal("Run did not return after the drain timeout")
	}
	if el := time.Since(start); el > testWait {
		t.Fatalf("shutdown took %s", el)
	}
}

func TestAdminEndpoints(t *testing.T) {
	ts := startServer(t, Config{}, newFakeDispatcher(false))
	base := "http://" + ts.AdminAddr()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"synced": false`) {
		t.Fatalf("/readyz before sync = %d %s", code, body)
	}
	ts.synced.Store(true)
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"live_brokers": 0`) {
		t.Fatalf("/readyz without brokers = %d %s", code, body)
	}
	ts.routes.SetBroker(routing.Broker{ID: 1, Addr: "127.0.0.1:1"})
	ts.routes.SetTopic(routing.Topic{Name: "orders", Partitions: 2})
	ts.routes.SetOwner("orders", 0, 1)
	ts.routes.SetEpoch("orders", 0, 3)
	code, body := get("/readyz")
	var r adminapi.Readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 || !r.Ready || r.LiveBrokers != 1 || r.RouteAgeSeconds != 1 {
		t.Fatalf("/readyz when ready = %d %s (%v)", code, body, err)
	}
	code, body = get("/v1/routes")
	var snap routing.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil || code != 200 || len(snap.Brokers) != 1 || len(snap.Partitions) != 2 {
		t.Fatalf("/v1/routes = %d %s (%v)", code, body, err)
	}
	if code, body := get("/v1/brokers"); code != 200 || !strings.Contains(body, `"addr": "127.0.0.1:1"`) {
		t.Fatalf("/v1/brokers = %d %s", code, body)
	}
	if code, _ := get("/v1/groups"); code != 200 {
		t.Fatalf("/v1/groups = %d", code)
	}
	c := dial(t, ts)
	c.send(3, 4, 1, nil)
	c.read()
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `kproxy_requests_total{api="Metadata"} 1`) || !strings.Contains(body, "kproxy_client_connections 1") {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	if code, _ := get("/debug/pprof/"); code != 404 {
		t.Fatalf("pprof served without EnablePprof: %d", code)
	}
}

func TestPprofWhenEnabled(t *testing.T) {
	ts := startServerAdmin(t, Config{}, newFakeDispatcher(false), nil, func(a *admin.Config) { a.EnablePprof = true })
	resp, err := http.Get("http://" + ts.AdminAddr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pprof = %d", resp.StatusCode)
	}
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", testWait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReplyReleasedAfterWrite checks that a reply's Release runs once, after
// its body is on the wire: the body's buffer is reused from then on, and the
// release scribbles over it as reuse would.
func TestReplyReleasedAfterWrite(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{}, d)
	c := dial(t, ts)
	c.send(3, 4, 7, nil)
	body := []byte("answer")
	released := make(chan struct{}, 2)
	d.next(t).release <- fakeResult{reply: apis.Reply{Body: body, Release: func() {
		copy(body, "XXXXXX")
		released <- struct{}{}
	}}}
	if corr, got := c.read(); corr != 7 || string(got) != "answer" {
		t.Fatalf("response: corr %d body %q", corr, got)
	}
	select {
	case <-released:
	case <-time.After(testWait):
		t.Fatalf("Release not called within %s of the write", testWait)
	}
	c.send(3, 4, 8, nil) // the connection goes on; nothing released twice
	d.next(t).answer()
	if corr, _ := c.read(); corr != 8 {
		t.Fatalf("next response: corr %d", corr)
	}
	if len(released) != 0 {
		t.Fatal("Release called twice")
	}
}

// TestRequestBodyValidUntilFinish: a call reads its request body in place
// until Finish returns, so the connection must not read later requests
// into the same buffer before then.
func TestRequestBodyValidUntilFinish(t *testing.T) {
	d := newFakeDispatcher(true)
	ts := startServer(t, Config{}, d)
	c := dial(t, ts)
	const n = 8
	for i := range n {
		c.send(3, 4, int32(i), bytes.Repeat([]byte{byte('a' + i)}, 600))
	}
	calls := make([]*fakeCall, n)
	for i := range calls {
		calls[i] = d.next(t)
	}
	for i, call := range calls { // every request read; none finished yet
		if !bytes.Equal(call.orig, call.body) {
			t.Fatalf("request %d's body changed before its Finish returned", i)
		}
		call.answer()
	}
	for range n {
		c.read()
	}
}
