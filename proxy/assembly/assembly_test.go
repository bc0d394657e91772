package assembly

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
)

// TestNewWiresRealParts runs New against embedded etcd (no brokers): the
// watch must make /readyz turn ready once a broker registers, and the real
// dispatcher must answer ApiVersions.
func TestNewWiresRealParts(t *testing.T) {
	_, cli := etcdtest.Start(t)
	lay := layout.New("/wiretest")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Advertise: "proxy.example:9092",
		ClusterID: "test", Etcd: cli, Layout: lay, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(3 * testWait):
			t.Error("Run did not return")
		}
	}()

	ready := func() (int, adminapi.Readiness) {
		resp, err := http.Get("http://" + srv.AdminAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r adminapi.Readiness
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("/readyz body %q: %v", b, err)
		}
		return resp.StatusCode, r
	}
	if code, r := ready(); code != http.StatusServiceUnavailable || r.LiveBrokers != 0 {
		t.Fatalf("/readyz without brokers = %d %+v", code, r)
	}
	info := layout.BrokerInfo{ID: 1, Addr: "127.0.0.1:1", Started: time.Now()}
	if _, err := cli.Put(ctx, lay.BrokerKey(1), layout.Marshal(info)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { code, _ := ready(); return code == http.StatusOK }, "/readyz 200 after a broker registered")

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	corr, body := roundTrip(t, srv.Addr(), 18, 3, 42, true, req.AppendTo(nil))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil || corr != 42 || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: corr %d err %v response %+v", corr, err, resp)
	}
}

const testWait = 5 * time.Second

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roundTrip sends one request frame to addr on a new connection and
// returns the response's correlation id and what follows it.
func roundTrip(t testing.TB, addr string, key, version int16, corr int32, flexible bool, payload []byte) (int32, []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testWait)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	id := "test"
	frame := kwire.AppendRequestHeader(nil, key, version, corr, &id, flexible)
	frame = append(frame, payload...)
	kwire.FinishFrame(frame)
	if _, err := nc.Write(frame); err != nil {
		t.Fatalf("write: %v", err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(testWait))
	f, err := kwire.ReadFrame(bufio.NewReader(nc), 4, 1<<30, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	buf := *f
	return int32(binary.BigEndian.Uint32(buf)), buf[4:]
}
