package adminui

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The series the page reads from the registry, the same ones /metrics
// exports: the page keeps no counters of its own.
const (
	mRequests      = "kproxy_requests_total"          // api
	mRequestErrors = "kproxy_request_errors_total"    // api, code
	mRetries       = "kproxy_retries_total"           // api, reason
	mUpRequests    = "kproxy_upstream_requests_total" // broker
	mUpErrors      = "kproxy_upstream_errors_total"   // broker, kind
	mUpInflight    = "kproxy_upstream_inflight"       // broker
	mUpConns       = "kproxy_upstream_connections"    // broker
)

// Rate is one API's or broker's traffic: per-second rates over the last
// window, and for brokers the current gauges.
type Rate struct {
	Name        string  `json:"name"`
	Requests    float64 `json:"requests"` // per second
	Errors      float64 `json:"errors"`   // per second
	Retries     float64 `json:"retries,omitempty"`
	Total       float64 `json:"total"` // requests since the proxy started
	Inflight    float64 `json:"inflight,omitempty"`
	Connections float64 `json:"connections,omitempty"`
}

// Rates is what the page shows of the counters.
type Rates struct {
	WindowSeconds float64 `json:"window_seconds"` // 0: no rates yet
	ByAPI         []Rate  `json:"by_api"`
	ByBroker      []Rate  `json:"by_broker"`
}

// sample is the counters summed per API and per broker at one time.
type sample struct {
	at       time.Time
	api      map[string]*Rate // Requests, Errors, Retries hold totals
	broker   map[string]*Rate
	complete bool
}

func takeSample(g prometheus.Gatherer, now time.Time) (sample, error) {
	s := sample{at: now, api: map[string]*Rate{}, broker: map[string]*Rate{}}
	mfs, err := g.Gather()
	if err != nil {
		return s, fmt.Errorf("gather metrics: %w", err)
	}
	row := func(m map[string]*Rate, name string) *Rate {
		r := m[name]
		if r == nil {
			r = &Rate{Name: name}
			m[name] = r
		}
		return r
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			switch mf.GetName() {
			case mRequests:
				row(s.api, label(m, "api")).Requests += v
			case mRequestErrors:
				row(s.api, label(m, "api")).Errors += v
			case mRetries:
				row(s.api, label(m, "api")).Retries += v
			case mUpRequests:
				row(s.broker, label(m, "broker")).Requests += v
			case mUpErrors:
				row(s.broker, label(m, "broker")).Errors += v
			case mUpInflight:
				row(s.broker, label(m, "broker")).Inflight += v
			case mUpConns:
				row(s.broker, label(m, "broker")).Connections += v
			}
		}
	}
	s.complete = true
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// ratesBetween turns two samples into per-second rates; without an earlier
// sample the rows have totals and gauges only. Rows that never counted
// anything (the series exported at zero) are left out.
func ratesBetween(prev, cur sample) Rates {
	dt := cur.at.Sub(prev.at).Seconds()
	if !prev.complete || dt <= 0 {
		prev, dt = sample{}, 0
	}
	api := diff(prev.api, cur.api, dt)
	slices.SortFunc(api, func(a, b Rate) int { return cmp.Compare(a.Name, b.Name) })
	return Rates{WindowSeconds: dt, ByAPI: api, ByBroker: diff(prev.broker, cur.broker, dt)}
}

func diff(prev, cur map[string]*Rate, dt float64) []Rate {
	out := []Rate{}
	for name, c := range cur {
		if c.Requests == 0 && c.Errors == 0 && c.Retries == 0 && c.Inflight == 0 && c.Connections == 0 {
			continue
		}
		r := Rate{Name: name, Total: c.Requests, Inflight: c.Inflight, Connections: c.Connections}
		if p := prev[name]; p != nil && dt > 0 {
			// A counter that went down was reset (a broker pool recreated):
			// count from zero rather than report a negative rate.
			r.Requests = max(c.Requests-p.Requests, 0) / dt
			r.Errors = max(c.Errors-p.Errors, 0) / dt
			r.Retries = max(c.Retries-p.Retries, 0) / dt
		}
		out = append(out, r)
	}
	// A stable order (broker ids are decimal: shorter is smaller), so that
	// rows do not jump as rates change.
	slices.SortFunc(out, func(a, b Rate) int {
		return cmp.Or(cmp.Compare(len(a.Name), len(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	return out
}
