package admin

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/routing"
)

// TestReadinessFollowsState: /readyz says 200 only when the table is
// synced, has a live broker and the proxy does not drain, and reports the
// proxy's zone and where fetches go; /v1/routes carries the zone.
func TestReadinessFollowsState(t *testing.T) {
	routes := routing.NewTable()
	var synced, draining atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep, err := New(Config{
		Routes: routes, Registry: prometheus.NewRegistry(), Zone: "zone-a", Logger: slog.New(slog.DiscardHandler),
		Status:   func() leasewatch.Status { return leasewatch.Status{Synced: synced.Load(), Revision: 7} },
		Draining: draining.Load,
	}, ln)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ep.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of its context's end")
		}
	}()
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get("http://" + ep.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s body %q: %v", path, b, err)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name                    string
		synced, broker, drain   bool
		zoneReads               bool
		wantCode                int
		wantReady               bool
		wantFetchFrom, wantZone string
	}{
		{"not synced", false, true, false, false, http.StatusServiceUnavailable, false, adminapi.FetchOwner, "zone-a"},
		{"no broker", true, false, false, false, http.StatusServiceUnavailable, false, adminapi.FetchOwner, "zone-a"},
		{"ready", true, true, false, false, http.StatusOK, true, adminapi.FetchOwner, "zone-a"},
		{"ready, zone reads", true, true, false, true, http.StatusOK, true, adminapi.FetchZone, "zone-a"},
		{"draining", true, true, true, true, http.StatusServiceUnavailable, false, adminapi.FetchZone, "zone-a"},
	} {
		synced.Store(tc.synced)
		draining.Store(tc.drain)
		routes.SetZoneReads(tc.zoneReads)
		if tc.broker {
			routes.SetBroker(routing.Broker{ID: 1, Addr: "127.0.0.1:1"})
		} else {
			routes.DeleteBroker(1)
		}
		var r adminapi.Readiness
		code := get("/readyz", &r)
		if code != tc.wantCode || r.Ready != tc.wantReady || r.Draining != tc.drain || r.Synced != tc.synced ||
			r.FetchFrom != tc.wantFetchFrom || r.Zone != tc.wantZone || r.Revision != 7 {
			t.Errorf("%s: /readyz = %d %+v", tc.name, code, r)
		}
	}
	var snap routing.Snapshot
	if code := get("/v1/routes", &snap); code != http.StatusOK || snap.Zone != "zone-a" || len(snap.Brokers) != 1 {
		t.Errorf("/v1/routes = %d %+v", code, snap)
	}
}
