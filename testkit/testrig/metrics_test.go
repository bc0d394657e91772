package testrig

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sampleMetrics = `# HELP kproxy_broker_fenced_commits_total Commits refused.
# TYPE kproxy_broker_fenced_commits_total counter
kproxy_broker_fenced_commits_total{kind="partition"} 3
kproxy_broker_fenced_commits_total{kind="group"} 2
# TYPE kproxy_broker_owned_partitions gauge
kproxy_broker_owned_partitions 4
kproxy_broker_odd{b="2",a="x y}"} 1.5 1700000000
# TYPE kproxy_broker_wait_seconds histogram
kproxy_broker_wait_seconds_bucket{le="0.1"} 1
kproxy_broker_wait_seconds_bucket{le="+Inf"} 3
kproxy_broker_wait_seconds_sum 0.9
kproxy_broker_wait_seconds_count 3
go_goroutines 12
`

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name, text, prefix string
		want               map[string]float64
		wantErr            bool
	}{
		{name: "prefix", text: sampleMetrics, prefix: "kproxy_broker_", want: map[string]float64{
			`kproxy_broker_fenced_commits_total{kind="partition"}`: 3,
			`kproxy_broker_fenced_commits_total{kind="group"}`:     2,
			"kproxy_broker_owned_partitions":                       4,
			`kproxy_broker_odd{a="x y}",b="2"}`:                    1.5,
			`kproxy_broker_wait_seconds_bucket{le="0.1"}`:          1,
			`kproxy_broker_wait_seconds_bucket{le="+Inf"}`:         3,
			"kproxy_broker_wait_seconds_sum":                       0.9,
			"kproxy_broker_wait_seconds_count":                     3,
		}},
		{name: "other family", text: sampleMetrics, prefix: "go_", want: map[string]float64{"go_goroutines": 12}},
		{name: "none", text: sampleMetrics, prefix: "etcd_", want: map[string]float64{}},
		{name: "bad value", text: "kproxy_x{a=\"b\"} notanumber\n", prefix: "kproxy_", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetrics(strings.NewReader(tt.text), tt.prefix)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseMetrics error %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseMetrics(prefix %q) (-want +got):\n%s", tt.prefix, diff)
			}
		})
	}
}

func TestScrapeCounterSumsOneMetric(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, sampleMetrics+"kproxy_broker_fenced_commits_total_extra 100\n")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := strings.TrimPrefix(srv.URL, "http://")
	got, err := ScrapeCounter(ctx, addr, "kproxy_broker_fenced_commits_total")
	if err != nil {
		t.Fatal(err)
	}
	if got != 5 {
		t.Errorf("ScrapeCounter = %v, want 5 (both kinds, not the _extra metric)", got)
	}
	if _, err := Scrape(ctx, addr+"/nothing-here", ""); err == nil {
		t.Error("Scrape of a missing endpoint gave no error")
	}
}
