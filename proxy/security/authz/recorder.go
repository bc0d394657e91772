package authz

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/promreg"
	"golang.org/x/time/rate"
)

// Event is one audited decision: who asked for what, from where, and what
// was decided by which binding.
type Event struct {
	Time         time.Time `json:"time"`
	Event        string    `json:"event"` // "authorization"
	Principal    string    `json:"principal"`
	Client       string    `json:"client"` // the client's host
	Listener     string    `json:"listener,omitempty"`
	API          string    `json:"api"`
	ResourceType string    `json:"resource_type"`
	Resource     string    `json:"resource"`
	Operation    string    `json:"operation"`
	Decision     string    `json:"decision"` // allowed, denied, dry-run-denied
	Reason       string    `json:"reason"`
	Binding      string    `json:"binding,omitempty"`
}

// Outcomes as counted and audited.
const (
	OutcomeAllowed      = "allowed"
	OutcomeDenied       = "denied"
	OutcomeDryRunDenied = "dry-run-denied" // denied by the bindings, let through
)

var outcomes = [...]string{OutcomeAllowed, OutcomeDenied, OutcomeDryRunDenied}

var resourceTypes = [...]kmsg.ACLResourceType{
	kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId,
}

// RecorderConfig configures a Recorder; every field is optional.
type RecorderConfig struct {
	// APIs are the API keys whose decisions are counted under their own
	// name (exported at zero from the start); others count as "other".
	// Whoever builds the Recorder passes the keys its authorizer is asked
	// for (apis.AuthorizedKeys, derived from the proxy's table of APIs).
	APIs       []int16
	Registerer prometheus.Registerer
	Logger     *slog.Logger // denials, at most one line per LogEvery
	LogEvery   time.Duration
	// Audit receives every denial and one in AuditAllowsEvery allows (0:
	// none).
	Audit            func(Event)
	AuditAllowsEvery uint64
	Now              func() time.Time
}

// Recorder counts decisions by API, resource type and outcome, logs
// denials (rate-limited) and writes audit events. A nil *Recorder records
// nothing.
type Recorder struct {
	cfg     RecorderConfig
	counts  map[int16]*[numTypes][len(outcomes)]prometheus.Counter
	other   [numTypes][len(outcomes)]prometheus.Counter
	bad     prometheus.Counter
	limiter *rate.Limiter
	allows  atomic.Uint64

	mu         sync.Mutex
	suppressed int // denials not logged since the last line
}

// NewRecorder registers the metrics.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	vec := promreg.CounterVec(cfg.Registerer, prometheus.CounterOpts{
		Name: "kproxy_authz_decisions_total",
		Help: "Authorization decisions by API, resource type and outcome (allowed, denied, dry-run-denied).",
	}, []string{"api", "resource_type", "outcome"})
	bad := promreg.Counter(cfg.Registerer, prometheus.CounterOpts{
		Name: "kproxy_authz_bad_bindings_total",
		Help: "ACL values in etcd skipped because they break the layout contract.",
	})
	r := &Recorder{cfg: cfg, counts: map[int16]*[numTypes][len(outcomes)]prometheus.Counter{}, bad: bad,
		limiter: rate.NewLimiter(rate.Every(cfg.LogEvery), 1)}
	fill := func(name string, dst *[numTypes][len(outcomes)]prometheus.Counter) {
		for _, rt := range resourceTypes {
			for oi, o := range outcomes {
				dst[rt][oi] = vec.WithLabelValues(name, rt.String(), o)
			}
		}
	}
	for _, k := range cfg.APIs {
		c := new([numTypes][len(outcomes)]prometheus.Counter)
		fill(kmsg.NameForKey(k), c)
		r.counts[k] = c
	}
	fill("other", &r.other)
	return r, nil
}

// BadBinding counts one skipped etcd value.
func (r *Recorder) BadBinding() {
	if r != nil {
		r.bad.Inc()
	}
}

// Record counts, logs and audits one decision of s for api.
func (r *Recorder) Record(ctx context.Context, api int16, s *Session, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, d Decision) {
	if r == nil || d.Reason == ReasonAllowAll {
		return
	}
	oi := 0
	switch {
	case !d.Allowed && d.DryRun:
		oi = 2
	case !d.Allowed:
		oi = 1
	}
	if rt >= 0 && int(rt) < numTypes {
		if c := r.counts[api]; c != nil {
			c[rt][oi].Inc()
		} else {
			r.other[rt][oi].Inc()
		}
	}
	if d.Allowed {
		if n := r.cfg.AuditAllowsEvery; n == 0 || r.allows.Add(1)%n != 0 {
			return
		}
	} else {
		r.logDenial(ctx, api, s, op, rt, name, d)
	}
	if r.cfg.Audit != nil {
		r.cfg.Audit(r.event(api, s, op, rt, name, d, outcomes[oi]))
	}
}

func (r *Recorder) event(api int16, s *Session, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, d Decision, outcome string) Event {
	e := Event{
		Time: r.cfg.Now().UTC(), Event: "authorization", Principal: s.principal, Client: s.host, Listener: s.listener,
		API: kmsg.NameForKey(api), ResourceType: rt.String(), Resource: name, Operation: op.String(),
		Decision: outcome, Reason: d.Reason.String(),
	}
	if d.Binding != nil {
		e.Binding = d.Binding.String()
	}
	return e
}

// logDenial writes at most one line per LogEvery, saying how many it left
// out.
func (r *Recorder) logDenial(ctx context.Context, api int16, s *Session, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, d Decision) {
	r.mu.Lock()
	if !r.limiter.Allow() {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	msg := "authorization denied"
	if d.DryRun {
		msg = "authorization would deny (dry run)"
	}
	r.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, msg,
		slog.String("principal", s.principal), slog.String("client", s.host), slog.String("api", kmsg.NameForKey(api)),
		slog.String("resource", rt.String()+":"+name), slog.String("operation", op.String()),
		slog.String("reason", d.Reason.String()), slog.Int("suppressed", n))
}
