package upstream

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBrokerErrorsAtZero: the first use of a broker exports its error
// series for every kind at 0.
func TestBrokerErrorsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.forBroker(7)
	if n := testutil.CollectAndCount(m.errors, "kproxy_upstream_errors_total"); n != len(errorKinds) {
		t.Fatalf("%d error series after forBroker, want one per kind (%d)", n, len(errorKinds))
	}
	for _, kind := range []string{"dial", "handshake", "write", "read", "timeout", "protocol", "closed"} {
		if v := testutil.ToFloat64(m.errors.WithLabelValues("7", kind)); v != 0 {
			t.Errorf("kind %s = %v", kind, v)
		}
	}
	if n := testutil.CollectAndCount(m.errors, "kproxy_upstream_errors_total"); n != 7 {
		t.Fatalf("%d error series, want 7: a kind is missing from errorKinds", n)
	}
}
