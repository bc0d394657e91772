package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/testkit/testrig"
)

const dashboardPath = "../deploy/grafana/kproxy.json"

// promqlMetric matches kproxy's metric names in a PromQL expression; label
// names, functions and Grafana variables never start with kproxy_.
var promqlMetric = regexp.MustCompile(`\bkproxy_[a-zA-Z0-9_:]+`)

// dashboardMetrics returns every kproxy metric named in the dashboard's
// queries (panel targets, nested rows and template variables).
func dashboardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	names := map[string][]string{} // metric -> the queries that name it
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					for _, m := range promqlMetric.FindAllString(s, -1) {
						names[m] = append(names[m], s)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	return names
}

// TestDashboardMetricsExported runs a short workload through a proxy and
// checks that every metric the Grafana dashboard queries is in its /metrics.
func TestDashboardMetricsExported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	names := dashboardMetrics(t)
	if len(names) < 15 {
		t.Fatalf("only %d metrics found in %s: the query parser missed them", len(names), dashboardPath)
	}
	c := devtest.Start(t, devcluster.Config{Brokers: 2, AutoCreateTopics: true, DefaultPartitions: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, records = "dash", 30
	prod := newClient(t, c.ProxyAddrs()[0], kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	for i := range records {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	got := len(consumeAll(t, c.ProxyAddrs()[0], topic, records, 30*time.Second))
	if got == 0 {
		t.Fatal("consumed nothing")
	}

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	series, err := testrig.Scrape(sctx, c.AdminAddrs()[0], "")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for s := range series {
		exported[testrig.MetricName(s)] = true
	}
	var missing []string
	for name, queries := range names {
		if !exported[name] {
			missing = append(missing, fmt.Sprintf("%s (in %q)", name, queries[0]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the dashboard queries metrics /metrics does not export:\n%s", strings.Join(missing, "\n"))
	}
	t.Logf("%d dashboard metrics, all exported", len(names))
}
