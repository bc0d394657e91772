// Package partlog is the stub broker's partition log: validating produced
// record batches, appending them as immutable segment objects committed
// through the fenced lease (one appender per owned partition, group-committing
// concurrent produces), and the committed view every broker serves fetches
// from.
//
// The promise: an append is acknowledged only after the fenced commit that
// makes its segment reachable succeeded; offsets come only from the state read
// when the partition was acquired (and the appender's own commits since); a
// fetch never creates an appender. Losing the partition drops the appender and
// everything it held.
package partlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
)

// Objects is the part of the object store the log writes and reads.
type Objects interface {
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// Hooks are failpoints for fault tests; nil funcs are skipped. They run on
// the partition's appender goroutine, so blocking in one stalls the partition.
type Hooks struct {
	BeforeCommit         func(topic string, partition int32)
	AfterCommitBeforeAck func(topic string, partition int32)
}

// Observer receives events for metrics. Every method must be cheap.
type Observer interface {
	Acquired(tp TP)
	Committed(tp TP, took time.Duration)
	CommitFailed(tp TP, fenced bool)
}

type nopObserver struct{}

func (nopObserver) Acquired(TP)                 {}
func (nopObserver) Committed(TP, time.Duration) {}
func (nopObserver) CommitFailed(TP, bool)       {}

// Config configures Logs. Session, Etcd, Store and View are required.
type Config struct {
	Session *lease.Session
	Etcd    *clientv3.Client
	Layout  layout.Layout
	Store   Objects
	View    *View
	Hooks   Hooks
	Obs     Observer // nil: none
	// DisableFencing commits with a plain put and trusts the cached
	// ownership: a deliberately broken mode for fault tests only.
	DisableFencing bool
	Logger         *slog.Logger
	// OpTimeout bounds each etcd or store operation (default 10s).
	OpTimeout time.Duration
	// MaxGroupBytes caps the bytes of one group commit (default 8 MiB).
	MaxGroupBytes int
	// Pacer bounds the acquisitions in flight, shared with the broker's
	// group coordinator (nil: one of the partitions' own, with pacer's
	// defaults). An append for a partition not yet held that gets no slot
	// is refused with NOT_LEADER_OR_FOLLOWER, which clients retry after a
	// metadata refresh, instead of queueing behind etcd.
	Pacer *pacer.Pacer
	// AcquireTimeout bounds one acquisition (default 3s).
	AcquireTimeout time.Duration
	Now            func() time.Time
}

// Result is the outcome of one append or trim.
type Result struct {
	Code       int16 // 0 or a Kafka error code
	Msg        string
	BaseOffset int64 // first offset of the append (or new log start of a trim)
	LogStart   int64
}

// Logs owns the appenders of the partitions this broker writes.
type Logs struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	apps   map[TP]*appender
	closed bool
}

// NewLogs returns a Logs with no appenders.
func NewLogs(cfg Config) *Logs {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Logs{cfg: cfg, ctx: ctx, cancel: cancel, apps: make(map[TP]*appender)}
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Obs == nil {
		c.Obs = nopObserver{}
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.MaxGroupBytes <= 0 {
		c.MaxGroupBytes = 8 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Pacer == nil {
		c.Pacer = pacer.New(pacer.Config{})
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = 3 * time.Second
	}
	return c
}

// Append queues batches (already validated by ParseProduce) for tp and
// returns at once; the result arrives on the channel. Appends queued for one
// partition are applied in the order Append was called. The first append of
// a partition acquires it.
func (l *Logs) Append(tp TP, batches []Batch) <-chan Result {
	return l.enqueue(tp, &request{batches: batches})
}

// Trim advances the log start offset of tp to offset (-1: the high
// watermark) through a fenced commit, acquiring the partition if free.
func (l *Logs) Trim(tp TP, offset int64) <-chan Result {
	return l.enqueue(tp, &request{trim: true, trimTo: offset})
}

func (l *Logs) enqueue(tp TP, r *request) <-chan Result {
	r.done = make(chan Result, 1)
	for _, b := range r.batches {
		r.bytes += len(b.Raw)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		r.finish(Result{Code: kerr.NotLeaderForPartition.Code, Msg: "broker shutting down"})
		return r.done
	}
	if a := l.apps[tp]; a != nil && a.enqueue(r) {
		return r.done
	}
	a := newAppender(l, tp)
	l.apps[tp] = a
	a.enqueue(r)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		a.run()
	}()
	return r.done
}

// Drop stops tp's appender after a reported loss of the partition, unless
// the session holds tp again under the ownership the appender uses (a late
// report of an older loss).
func (l *Logs) Drop(tp TP, reason error) {
	l.mu.Lock()
	a := l.apps[tp]
	l.mu.Unlock()
	if a == nil {
		return
	}
	if o, ok := l.cfg.Session.Owns(a.res); ok && o == a.owned.Load() {
		return
	}
	a.stop(reason)
}

// Owned lists the partitions that have an appender.
func (l *Logs) Owned() []TP {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]TP, 0, len(l.apps))
	for tp := range l.apps {
		out = append(out, tp)
	}
	return out
}

// Close stops every appender: queued appends fail with
// NOT_LEADER_OR_FOLLOWER, commits already in flight finish until ctx ends
// (then they are cut off, which makes them ambiguous).
func (l *Logs) Close(ctx context.Context) {
	l.mu.Lock()
	l.closed = true
	apps := make([]*appender, 0, len(l.apps))
	for _, a := range l.apps {
		apps = append(apps, a)
	}
	l.mu.Unlock()
	for _, a := range apps {
		a.stop(errors.New("broker shutting down"))
	}
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	l.cancel()
	<-done
}

func (l *Logs) remove(a *appender) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.apps[a.tp] == a {
		delete(l.apps, a.tp)
	}
}
