package scale

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/testkit/testrig"
)

func topicID() (string, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("topic id: %w", err)
	}
	return hex.EncodeToString(id), nil
}

// waitRevision polls a proxy's /readyz until its table is complete up to
// rev, back to back (convergence is timed with it).
func waitRevision(ctx context.Context, admin string, rev int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r, err := adminapi.FetchReadiness(ctx, admin)
		if err == nil && r.Revision >= rev {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("table not complete up to revision %d within %s", rev, timeout)
}

// etcdCounters are etcd's own counters (its /metrics on the client URL).
type etcdCounters struct {
	at        time.Time
	txns      float64 // etcd_mvcc_txn_total
	puts      float64 // etcd_mvcc_put_total
	proposals float64 // etcd_server_proposals_committed_total
	dbBytes   float64 // etcd_mvcc_db_total_size_in_bytes
}

func readEtcd(ctx context.Context, addr string) (etcdCounters, error) {
	m, err := testrig.Scrape(ctx, addr, "etcd_")
	if err != nil {
		return etcdCounters{}, fmt.Errorf("etcd metrics: %w", err)
	}
	return etcdCounters{at: time.Now(), txns: m["etcd_mvcc_txn_total"], puts: m["etcd_mvcc_put_total"],
		proposals: m["etcd_server_proposals_committed_total"], dbBytes: m["etcd_mvcc_db_total_size_in_bytes"]}, nil
}

// rates are etcd's write transactions and committed proposals per second
// between a and b.
func rates(a, b etcdCounters) (txnPerSec, proposalsPerSec float64) {
	s := b.at.Sub(a.at).Seconds()
	if s <= 0 {
		return 0, 0
	}
	return (b.txns - a.txns) / s, (b.proposals - a.proposals) / s
}

// BrokerLosses are the loss counters a broker exports: lease session
// losses and ownerships lost without a release. SessionCounter is false
// when the broker does not export the session counter (an older build), so
// that an absent counter never reads as 0 losses.
type BrokerLosses struct {
	Sessions, Ownerships float64
	SessionCounter       bool
}

// SessionLossSeries is the brokers' lease session loss counter.
const SessionLossSeries = "kproxy_broker_session_losses_total"

// ReadLosses scrapes a broker's loss counters from its metrics endpoint.
func ReadLosses(ctx context.Context, metricsAddr string) (BrokerLosses, error) {
	m, err := testrig.Scrape(ctx, metricsAddr, "kproxy_broker_")
	if err != nil {
		return BrokerLosses{}, err
	}
	s, ok := m[SessionLossSeries]
	return BrokerLosses{Sessions: s, Ownerships: m["kproxy_broker_losses_total"], SessionCounter: ok}, nil
}

// percentile is the q-quantile (0..1) of ds by nearest rank.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
