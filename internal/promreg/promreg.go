// Package promreg registers Prometheus collectors on a registry that is
// passed in (never the global one), tolerating a second registration of the
// same series: two servers or pools in one process then share it.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c, or returns the collector already registered under
// the same name and labels. On any other registration error c is returned
// unregistered: a metric must never stop the proxy from serving.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	return c
}
