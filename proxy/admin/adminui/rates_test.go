package adminui

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRatesFromTheRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests, Help: "h"}, []string{"api"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequestErrors, Help: "h"}, []string{"api", "code"})
	up := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mUpRequests, Help: "h"}, []string{"broker"})
	inflight := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mUpInflight, Help: "h"}, []string{"broker"})
	reg.MustRegister(reqs, errs, up, inflight)
	reqs.WithLabelValues("Fetch") // at zero: left out
	reqs.WithLabelValues("Produce").Add(10)
	up.WithLabelValues("10").Add(100)
	up.WithLabelValues("2").Add(7)
	t0 := time.Unix(1000, 0)
	s0, err := takeSample(reg, t0)
	if err != nil {
		t.Fatal(err)
	}
	first := ratesBetween(sample{}, s0)
	if first.WindowSeconds != 0 || len(first.ByAPI) != 1 || first.ByAPI[0].Total != 10 || first.ByAPI[0].Requests != 0 {
		t.Fatalf("without an earlier sample: %+v", first)
	}
	reqs.WithLabelValues("Produce").Add(20)
	errs.WithLabelValues("Produce", "INVALID_REQUEST").Add(2)
	errs.WithLabelValues("Produce", "DISPATCH_FAILED").Add(2)
	inflight.WithLabelValues("2").Set(3)
	s1, err := takeSample(reg, t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := ratesBetween(s0, s1)
	if r.WindowSeconds != 2 || len(r.ByAPI) != 1 {
		t.Fatalf("rates %+v", r)
	}
	if a := r.ByAPI[0]; a.Name != "Produce" || a.Requests != 10 || a.Errors != 2 || a.Total != 30 {
		t.Fatalf("Produce %+v, want 10 req/s, 2 err/s (two codes summed), total 30", a)
	}
	// Brokers in id order, "2" before "10"; a broker pool recreated (its
	// counter back to a lower value) shows no negative rate.
	if len(r.ByBroker) != 2 || r.ByBroker[0].Name != "2" || r.ByBroker[0].Inflight != 3 || r.ByBroker[1].Name != "10" {
		t.Fatalf("brokers %+v", r.ByBroker)
	}
	s1.broker["10"].Requests = 50
	if r := ratesBetween(s0, s1); r.ByBroker[1].Requests != 0 {
		t.Fatalf("reset counter gave rate %v", r.ByBroker[1].Requests)
	}
}
