// The constructors that build a metric and register it in one call, so
// each metric is named once.

package promreg

import "github.com/prometheus/client_golang/prometheus"

// add registers c on reg as Register does; a nil reg registers nothing and
// c is used unregistered (tests, tools).
func add[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	return Register(reg, c)
}

// Counter builds a counter and registers it on reg (nil: none).
func Counter(reg prometheus.Registerer, opts prometheus.CounterOpts) prometheus.Counter {
	return add(reg, prometheus.NewCounter(opts))
}

// CounterVec builds a counter vector and registers it on reg (nil: none).
func CounterVec(reg prometheus.Registerer, opts prometheus.CounterOpts, labels []string) *prometheus.CounterVec {
	return add(reg, prometheus.NewCounterVec(opts, labels))
}

// Gauge builds a gauge and registers it on reg (nil: none).
func Gauge(reg prometheus.Registerer, opts prometheus.GaugeOpts) prometheus.Gauge {
	return add(reg, prometheus.NewGauge(opts))
}

// GaugeVec builds a gauge vector and registers it on reg (nil: none).
func GaugeVec(reg prometheus.Registerer, opts prometheus.GaugeOpts, labels []string) *prometheus.GaugeVec {
	return add(reg, prometheus.NewGaugeVec(opts, labels))
}

// GaugeFunc builds a gauge that reads f and registers it on reg (nil:
// none).
func GaugeFunc(reg prometheus.Registerer, opts prometheus.GaugeOpts, f func() float64) prometheus.GaugeFunc {
	return add(reg, prometheus.NewGaugeFunc(opts, f))
}

// Histogram builds a histogram and registers it on reg (nil: none).
func Histogram(reg prometheus.Registerer, opts prometheus.HistogramOpts) prometheus.Histogram {
	return add(reg, prometheus.NewHistogram(opts))
}

// HistogramVec builds a histogram vector and registers it on reg (nil:
// none).
func HistogramVec(reg prometheus.Registerer, opts prometheus.HistogramOpts, labels []string) *prometheus.HistogramVec {
	return add(reg, prometheus.NewHistogramVec(opts, labels))
}
