package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "kproxy_test_total", Help: "test"}
	a := Register(reg, prometheus.NewCounter(opts))
	b := Register(reg, prometheus.NewCounter(opts))
	a.Inc()
	b.Inc()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 2 {
		t.Fatalf("second registration did not share the series: %v %v", mfs, err)
	}
}

func TestRegisterConflictStillUsable(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_x", Help: "a"}))
	g := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_x", Help: "b"}))
	g.Set(1) // unregistered, but usable
	if mfs, _ := reg.Gather(); len(mfs) != 1 || mfs[0].GetType().String() != "COUNTER" {
		t.Fatalf("conflicting registration replaced the first: %v", mfs)
	}
}

// The constructors register what they build, share a series registered
// twice, and with no registry give a usable metric.
func TestConstructorsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := Counter(reg, prometheus.CounterOpts{Name: "kproxy_c_total", Help: "c"})
	b := Counter(reg, prometheus.CounterOpts{Name: "kproxy_c_total", Help: "c"})
	a.Inc()
	b.Inc()
	CounterVec(reg, prometheus.CounterOpts{Name: "kproxy_cv_total", Help: "cv"}, []string{"l"}).WithLabelValues("x").Inc()
	Gauge(reg, prometheus.GaugeOpts{Name: "kproxy_g", Help: "g"}).Set(1)
	GaugeVec(reg, prometheus.GaugeOpts{Name: "kproxy_gv", Help: "gv"}, []string{"l"}).WithLabelValues("x").Set(1)
	GaugeFunc(reg, prometheus.GaugeOpts{Name: "kproxy_gf", Help: "gf"}, func() float64 { return 1 })
	Histogram(reg, prometheus.HistogramOpts{Name: "kproxy_h", Help: "h"}).Observe(1)
	HistogramVec(reg, prometheus.HistogramOpts{Name: "kproxy_hv", Help: "hv"}, []string{"l"}).WithLabelValues("x").Observe(1)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 7 {
		t.Fatalf("gathered %d families (%v), want 7", len(mfs), err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kproxy_c_total" && mf.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Errorf("the counter built twice did not share its series: %v", mf)
		}
	}
	Counter(nil, prometheus.CounterOpts{Name: "kproxy_none_total", Help: "n"}).Inc() // no registry: usable
}
