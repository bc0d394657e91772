package apis

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/ratelog"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// produceGuard refuses Produce record data that a broker could mis-store
// (recordcheck), counts each refusal in kproxy_bad_input_total and logs it
// at a limited rate.
type produceGuard struct {
	level recordcheck.Level
	bad   *prometheus.CounterVec // reason; nil: not counted
	log   *ratelog.Logger
}

func newProduceGuard(cfg Config) produceGuard {
	g := produceGuard{
		level: cfg.ProduceValidation, bad: cfg.BadInput,
		log: ratelog.New(cfg.Logger, slog.LevelWarn, cfg.BadInputLogInterval, cfg.Now),
	}
	if g.bad != nil {
		for _, r := range recordcheck.Reasons() {
			g.bad.WithLabelValues(r.String()) // at 0 before the first refusal
		}
	}
	return g
}

// refused counts and logs one refused partition.
func (g *produceGuard) refused(r recordcheck.Result, clientID *string, version int16, topic string, part int32) {
	if g.bad != nil {
		g.bad.WithLabelValues(r.Reason.String()).Inc()
	}
	client := ""
	if clientID != nil {
		client = *clientID
	}
	g.log.Log(r.Reason.String(), "produce partition refused: its record data would be mis-stored",
		"client_id", client, "topic", topic, "partition", part, "version", version,
		"code", kerr.TypedErrorForCode(r.Code).Message)
}

// transactionalNoID is Kafka's first check of a Produce: a transactional
// batch in a request without a transactional id fails the whole request
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. It returns that code, or 0.
func (o *produceOp) transactionalNoID() int16 {
	if o.req.TransactionID != nil || o.d.pg.level == recordcheck.Off {
		return 0
	}
	var code int16
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if recordcheck.Transactional(p.Records) {
				r := recordcheck.Result{Reason: recordcheck.TransactionalNoID, Code: kerr.TransactionalIDAuthorizationFailed.Code}
				o.d.pg.refused(r, o.client, o.req.Version, t.Topic, p.Partition)
				code = r.Code
			}
		}
	}
	return code
}

// checkRecords validates the records of item (ti, pi), which exists and may
// be written (Kafka checks records after both), and returns the code to
// answer it with, or 0 to forward it.
func (o *produceOp) checkRecords(topic string, ti, pi int32) int16 {
	p := &o.req.Topics[ti].Partitions[pi]
	r := recordcheck.Check(o.d.pg.level, o.req.Version, o.req.TransactionID != nil, p.Records)
	if r.OK() {
		return 0
	}
	o.d.pg.refused(r, o.client, o.req.Version, topic, p.Partition)
	return r.Code
}

// defaultBadInputLogInterval is the proxy's default (Limits.BadInputLogInterval).
const defaultBadInputLogInterval = 10 * time.Second
