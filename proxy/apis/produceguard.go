package apis

// This file holds the Produce checks the proxy makes before it forwards a
// partition, each answered with Kafka's code: the record data
// (recordcheck), the required acks, a transactional batch that no
// transaction can have begun, and a partition listed twice.

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/ratelog"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// The kproxy_bad_input_total reasons of the Produce checks that are not
// about record data (recordcheck's reasons are).
const (
	reasonRequiredAcks = "produce_required_acks"
	reasonTxnState     = "produce_txn_state"
	reasonDuplicate    = "produce_duplicate_partition"
)

// produceGuard refuses Produce record data that a broker could mis-store
// (recordcheck), counts each refusal in kproxy_bad_input_total and logs it
// at a limited rate.
type produceGuard struct {
	check *recordcheck.Checker
	bad   *prometheus.CounterVec // reason; nil: not counted
	log   *ratelog.Logger
}

func newProduceGuard(cfg Config) (produceGuard, error) {
	chk, err := recordcheck.New(recordcheck.Config{Level: cfg.ProduceValidation, MaxBatchBytes: cfg.MaxBatchBytes})
	if err != nil {
		return produceGuard{}, err
	}
	g := produceGuard{
		check: chk, bad: cfg.BadInput,
		log: ratelog.New(cfg.Logger, slog.LevelWarn, cfg.BadInputLogInterval, cfg.Now),
	}
	if g.bad != nil {
		for _, r := range recordcheck.Reasons() {
			g.bad.WithLabelValues(r.String()) // at 0 before the first refusal
		}
		for _, r := range []string{reasonRequiredAcks, reasonTxnState, reasonDuplicate} {
			g.bad.WithLabelValues(r)
		}
	}
	return g, nil
}

func (g *produceGuard) level() recordcheck.Level { return g.check.Level() }

// refused counts and logs one refused partition (code 0: a listing left
// out, as a duplicate).
func (g *produceGuard) refused(reason string, code int16, clientID *string, version int16, topic string, part int32) {
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

// transactionalNoID is Kafka's first check of a Produce: a transactional
// batch in a request without a transactional id fails the whole request
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. It returns that code, or 0.
func (o *produceOp) transactionalNoID() int16 {
	if o.req.TransactionID != nil || o.d.pg.level() == recordcheck.Off {
		return 0
	}
	var code int16
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if recordcheck.Transactional(p.Records) {
				code = kerr.TransactionalIDAuthorizationFailed.Code
				o.d.pg.refused(recordcheck.TransactionalNoID.String(), code, o.client, o.req.Version, t.Topic, p.Partition)
			}
		}
	}
	return code
}

// validAcks is Kafka's rule: -1 (all), 0 (none) or 1 (the leader). Kafka
// answers any other value INVALID_REQUIRED_ACKS for every partition that
// exists and may be written, and appends nothing.
func validAcks(acks int16) bool { return acks >= -1 && acks <= 1 }

// checkPartition checks item (ti, pi), which exists and may be written
// (Kafka checks the rest after both), and returns the code to answer it
// with, or 0 to forward it.
func (o *produceOp) checkPartition(ctx context.Context, topic string, ti, pi int32) int16 {
	p := &o.req.Topics[ti].Partitions[pi]
	reason, code := o.partitionFault(ctx, p.Records)
	if code != 0 {
		o.d.pg.refused(reason, code, o.client, o.req.Version, topic, p.Partition)
	}
	return code
}

// partitionFault is why records may not be forwarded, and Kafka's code
// for it (0: they may).
func (o *produceOp) partitionFault(ctx context.Context, records []byte) (string, int16) {
	if !validAcks(o.req.Acks) {
		return reasonRequiredAcks, kerr.InvalidRequiredAcks.Code
	}
	if r := o.d.pg.check.Check(o.req.Version, o.req.TransactionID != nil, records); !r.OK() {
		return r.Reason.String(), r.Code
	}
	if o.req.TransactionID != nil && o.d.pg.level() != recordcheck.Off &&
		recordcheck.Transactional(records) && !o.d.poolServesTxns(ctx) {
		return reasonTxnState, kerr.InvalidTxnState.Code
	}
	return "", 0
}

// poolServesTxns reports whether every broker of the pool advertises
// AddPartitionsToTxn and EndTxn, as the proxy learned from their
// ApiVersions (probed first if no broker is known yet).
//
// A transactional batch sent to a pool without them cannot belong to a
// transaction that began (no AddPartitionsToTxn can have succeeded), so it
// is answered INVALID_TXN_STATE, as Kafka 3.6+ answers a batch whose
// producer never added the partition; KafScale advertises no transaction
// APIs. A pool that serves transactions checks this itself (Kafka 3.6+
// verifies every transactional append against its coordinator), so the
// proxy keeps no per-producer record of its own: one would be wrong behind
// several proxy replicas, where the AddPartitionsToTxn may have passed
// through another replica. A pool whose brokers are all unknown is left to
// decide (the proxy cannot tell).
func (d *Dispatcher) poolServesTxns(ctx context.Context) bool {
	t := d.vers.current()
	if len(t.brokers) == 0 {
		t = d.vers.refresh(ctx)
	}
	if len(t.brokers) == 0 {
		return true
	}
	return t.direct.get(int16(kmsg.AddPartitionsToTxn)).ok() && t.direct.get(int16(kmsg.EndTxn)).ok()
}
