package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// codec is a Kafka compression codec, named as clients and the matrix name it.
type codec string

const (
	codecNone   codec = "none"
	codecGzip   codec = "gzip"
	codecSnappy codec = "snappy"
	codecLZ4    codec = "lz4"
	codecZstd   codec = "zstd"
)

// allCodecs are the codecs the matrix has a column for.
var allCodecs = []codec{codecGzip, codecSnappy, codecLZ4, codecZstd}

// codecFromAttrs decodes the compression bits of a record batch's attributes.
func codecFromAttrs(attrs int16) codec {
	switch attrs & 0x07 {
	case 0:
		return codecNone
	case 1:
		return codecGzip
	case 2:
		return codecSnappy
	case 3:
		return codecLZ4
	case 4:
		return codecZstd
	}
	return codec(fmt.Sprintf("unknown(%d)", attrs&0x07))
}

type produceOpts struct {
	codec codec // "" or codecNone: uncompressed
	// idempotent turns the idempotent producer on; false leaves the
	// client's default (on for kgo, off for the others).
	idempotent bool
	// deliveryTimeout bounds how long the client may take to report each
	// record's outcome, mapped by each driver to its client's own setting;
	// 0 keeps the client's default.
	deliveryTimeout time.Duration
	// answered, if set, is called once per record as soon as the client
	// reports its outcome to the application (nil: acknowledged), by the
	// drivers whose reportsEach is true; the others report only when
	// produce returns.
	answered func(r Rec, err error)
}

// answer reports r's outcome to o.answered, if set.
func (o produceOpts) answer(r Rec, err error) {
	if o.answered != nil {
		o.answered(r, err)
	}
}

// metaView is what a client learned from metadata.
type metaView struct {
	brokers map[int32]string // node id -> host:port
	leaders map[int32]int32  // partition -> leader node id
}

// stream is a running consumer. Its channel is closed once stop returns.
type stream interface {
	records() <-chan Rec
	// stop shuts the consumer down the way an application would; a group
	// member commits what it consumed and leaves the group.
	stop(ctx context.Context) error
}

// driver adapts one client library or tool to the checks. Every method uses
// the client's own API; nothing here talks Kafka protocol itself.
type driver interface {
	name() string
	version() string
	// notes are facts about how the client is run, for the doc.
	notes() []string
	// unavailable says how to install the client if it cannot run here.
	unavailable() string
	codecs() []codec
	hasIdempotence() bool
	// reportsEach says whether produce calls produceOpts.answered for each
	// record as the client reports it (in-process clients), rather than
	// only when the client exits (subprocesses).
	reportsEach() bool
	metadata(ctx context.Context, bootstrap []string, topic string) (metaView, error)
	// produce sends every record from in, in order, until in is closed and
	// everything is delivered; it returns the records the client reported
	// acknowledged and the first delivery error the application saw.
	produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error)
	// consume starts a consumer: with group "" it reads every partition from
	// the beginning and commits nothing; otherwise it is a member of group
	// that starts from the beginning when the group has no committed offset.
	consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error)
	// saslRoundTrip produces n records to topic over st's SASL_SSL listener
	// with SCRAM-SHA-512, then reads them back as a member of a group and
	// commits.
	saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error
}

// errNotSupported marks a capability the client does not have.
var errNotSupported = errors.New("not supported by this client")

// produceAll produces recs and fails unless every one was acknowledged.
func produceAll(ctx context.Context, d driver, bootstrap []string, topic string, recs []Rec, o produceOpts) error {
	in := make(chan Rec, len(recs))
	for _, r := range recs {
		in <- r
	}
	close(in)
	acked, err := d.produce(ctx, bootstrap, topic, in, o)
	if err != nil {
		return fmt.Errorf("produce %d records to %s: %w", len(recs), topic, err)
	}
	if len(acked) != len(recs) {
		return fmt.Errorf("produce to %s: %d of %d records acknowledged", topic, len(acked), len(recs))
	}
	return nil
}

// collector gathers what several streams deliver, per stream, until they
// are stopped.
type collector struct {
	mu     sync.Mutex
	per    [][]Rec
	notify chan struct{}
	wg     sync.WaitGroup
}

func collect(streams ...stream) *collector {
	c := &collector{per: make([][]Rec, len(streams)), notify: make(chan struct{}, 1)}
	for i, s := range streams {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for r := range s.records() {
				c.mu.Lock()
				c.per[i] = append(c.per[i], r)
				c.mu.Unlock()
				select {
				case c.notify <- struct{}{}:
				default:
				}
			}
		}()
	}
	return c
}

// snapshot returns copies of what each stream delivered so far.
func (c *collector) snapshot() [][]Rec {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]Rec, len(c.per))
	for i, rs := range c.per {
		out[i] = append([]Rec(nil), rs...)
	}
	return out
}

func (c *collector) all() []Rec {
	var out []Rec
	for _, rs := range c.snapshot() {
		out = append(out, rs...)
	}
	return out
}

// waitUntil waits, at most d, until cond holds for what was delivered.
func (c *collector) waitUntil(ctx context.Context, d time.Duration, what string, cond func(per [][]Rec) bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if cond(c.snapshot()) {
			return nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return fmt.Errorf("waiting %v for %s: %w", d, what, ctx.Err())
		}
	}
}

// countValues counts the distinct values of want that were delivered. It
// counts values, not stored records: a value stored twice (a producer
// retry) must not stand in for one that has not arrived yet.
func countValues(per [][]Rec, want map[string]bool) int {
	seen := make(map[string]bool)
	for _, rs := range per {
		for _, r := range rs {
			if want[r.Value] {
				seen[r.Value] = true
			}
		}
	}
	return len(seen)
}

func valueSet(recs []Rec) map[string]bool {
	m := make(map[string]bool, len(recs))
	for _, r := range recs {
		m[r.Value] = true
	}
	return m
}

// chanStream is the stream most drivers use: a channel their poll loop
// feeds, closed by the loop when it ends.
type chanStream struct {
	ch     chan Rec
	cancel context.CancelFunc
	done   chan struct{} // closed when the poll loop has ended
	errMu  sync.Mutex
	err    error
	// shutdown runs after the loop ended (commit, leave, close).
	shutdown func(ctx context.Context) error

	stopOnce sync.Once
	stopErr  error
}

func newChanStream(parent context.Context) (*chanStream, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	return &chanStream{ch: make(chan Rec, maxLines), cancel: cancel, done: make(chan struct{})}, ctx
}

func (s *chanStream) records() <-chan Rec { return s.ch }

// push hands a record to the test; the buffer is sized for every test's
// record count, so a full buffer is a harness bug reported as an error.
func (s *chanStream) push(r Rec) {
	select {
	case s.ch <- r:
	default:
		s.fail(fmt.Errorf("record buffer full: dropped p%d@%d", r.Partition, r.Offset))
	}
}

func (s *chanStream) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// loopDone is called by the poll loop when it returns.
func (s *chanStream) loopDone() { close(s.done) }

// stop is idempotent: tests call it, and a cleanup calls it again.
func (s *chanStream) stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.doStop(ctx) })
	return s.stopErr
}

func (s *chanStream) doStop(ctx context.Context) error {
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("consumer loop did not end: %w", ctx.Err())
	}
	var err error
	if s.shutdown != nil {
		err = s.shutdown(ctx)
	}
	close(s.ch)
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return errors.Join(s.err, err)
}
