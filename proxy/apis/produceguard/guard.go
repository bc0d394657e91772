// Package produceguard holds what the proxy's Produce checks share besides
// the record data rules (package recordcheck): the checker at its level,
// the count and rate-limited log of every refused partition in
// kproxy_bad_input_total, Kafka's rule for required acks, and the finding
// of partitions a request lists more than once. It promises no allocation
// per request once its scratch has grown; its limit is that it decides
// nothing about routing or authorization (the dispatcher does).
package produceguard

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/ratelog"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// The kproxy_bad_input_total reasons of the Produce checks that are not
// about record data (recordcheck's reasons are).
const (
	RequiredAcks = "produce_required_acks"
	TxnState     = "produce_txn_state"
	Duplicate    = "produce_duplicate_partition"
)

// Config configures a Guard.
type Config struct {
	Level         recordcheck.Level
	MaxBatchBytes int                    // recordcheck.Config.MaxBatchBytes
	BadInput      *prometheus.CounterVec // by reason; nil: not counted
	Logger        *slog.Logger
	LogInterval   time.Duration // at most one line per reason per interval
	Now           func() time.Time
}

// Guard checks and reports refused Produce partitions; it is safe for
// concurrent use. Close releases its checker.
type Guard struct {
	Check *recordcheck.Checker
	bad   *prometheus.CounterVec
	log   *ratelog.Logger
}

// New returns a Guard for cfg, its reasons counted at 0 from the start.
func New(cfg Config) (*Guard, error) {
	chk, err := recordcheck.New(recordcheck.Config{Level: cfg.Level, MaxBatchBytes: cfg.MaxBatchBytes})
	if err != nil {
		return nil, fmt.Errorf("produce validation: %w", err)
	}
	g := &Guard{Check: chk, bad: cfg.BadInput, log: ratelog.New(cfg.Logger, slog.LevelWarn, cfg.LogInterval, cfg.Now)}
	if g.bad != nil {
		for _, r := range recordcheck.Reasons() {
			g.bad.WithLabelValues(r.String())
		}
		for _, r := range []string{RequiredAcks, TxnState, Duplicate} {
			g.bad.WithLabelValues(r)
		}
	}
	return g, nil
}

// Level is the level records are checked at.
func (g *Guard) Level() recordcheck.Level { return g.Check.Level() }

// Close releases the checker's decoders.
func (g *Guard) Close() { g.Check.Close() }

// Refused counts and logs one refused partition (code 0: a listing left
// out, as a duplicate).
func (g *Guard) Refused(reason string, code int16, clientID *string, version int16, topic string, part int32) {
	if g.bad != nil {
		g.bad.WithLabelValues(reason).Inc()
	}
	client, msg := "", "none: left out of the request"
	if clientID != nil {
		client = *clientID
	}
	if e := kerr.TypedErrorForCode(code); e != nil {
		msg = e.Message
	}
	g.log.Log(reason, "produce partition refused",
		"client_id", client, "topic", topic, "partition", part, "version", version, "code", msg)
}

// ValidAcks is Kafka's rule: -1 (all), 0 (none) or 1 (the leader). Kafka
// answers any other value INVALID_REQUIRED_ACKS for every partition that
// exists and may be written, and appends nothing.
func ValidAcks(acks int16) bool { return acks >= -1 && acks <= 1 }
