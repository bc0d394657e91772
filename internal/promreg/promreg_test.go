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
