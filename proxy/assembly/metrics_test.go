package assembly

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/proxy"
)

// TestMetricsAtZero: a fresh proxy, before any client or etcd event,
// exports the series whose labels are known in advance, at 0.
func TestMetricsAtZero(t *testing.T) {
	_, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := New(ctx, Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: cli,
		Registry: prometheus.NewRegistry(), Server: proxy.Config{DrainTimeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("proxy did not stop within 15s")
		}
	}()
	resp, err := http.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	for _, tc := range []struct {
		series string
		want   bool
	}{
		{`kproxy_retries_total{api="Produce",reason="NOT_LEADER_FOR_PARTITION"} 0`, true},
		{`kproxy_retries_total{api="Produce",reason="not_sent"} 0`, true},
		{`kproxy_retries_total{api="Fetch",reason="REQUEST_TIMED_OUT"} 0`, true},
		{`kproxy_retries_total{api="Fetch",reason="transport"} 0`, true},
		{`kproxy_retries_total{api="JoinGroup",reason="NOT_COORDINATOR"} 0`, true},
		// A produce that may have been written is never retried, so these
		// series could only ever be 0: they are not exported.
		{`kproxy_retries_total{api="Produce",reason="REQUEST_TIMED_OUT"}`, false},
		{`kproxy_retries_total{api="Produce",reason="transport"}`, false},
		// Answered by the proxy itself: never retried.
		{`kproxy_retries_total{api="Metadata"`, false},
		{`kproxy_requests_total{api="Produce"} 0`, true},
		{`kproxy_requests_total{api="Metadata"} 0`, true},
		{`kproxy_request_errors_total{api="Fetch",code="INVALID_REQUEST"} 0`, true},
		{`kproxy_request_errors_total{api="ApiVersions",code="UNSUPPORTED_VERSION"} 0`, true},
		{`kproxy_request_errors_total{api="Produce",code="DISPATCH_FAILED"} 0`, true},
		{`kproxy_watch_resyncs_total{reason="compacted"} 0`, true},
		{`kproxy_watch_resyncs_total{reason="stalled"} 0`, true},
		{`kproxy_watch_bad_values_total{kind="owner"} 0`, true},
		{`kproxy_client_connections 0`, true},
		{`kproxy_buffer_pool_free_bytes 0`, true},
		{`kproxy_quota_throttled_responses_total{quota="producer_byte_rate"} 0`, true},
		{`kproxy_quota_throttle_seconds_total{quota="request_percentage"} 0`, true},
	} {
		if got := strings.Contains(body, tc.series); got != tc.want {
			t.Errorf("/metrics has %s: %v, want %v", tc.series, got, tc.want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
