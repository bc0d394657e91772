// Package apis answers the Kafka requests a client sends to the proxy: one
// table (table.go) names each API's handler; each handler decodes what
// routing needs and is an adapter of the split engine (package split),
// which routes partition- and group-scoped items by owner, forwards them
// through a Sender, retries definite failures on the current owner and has
// the adapter merge the answers in the client's order. Connections,
// framing and response ordering belong to package proxy; pooled broker
// connections belong to package upstream.
//
// The table's row of an API is everything the proxy knows of it (kind,
// handler, auth rule, routing key, hold, repeatable, refusal codes); the
// packages below this one hold what the rows name and import nothing above
// them: split (the engine), authrule (the auth rules and guards), local
// (ACL, SCRAM and quota answers from the proxy's stores), answer (responses
// built by reflection) and recordcheck (produce record checks).
//
// Ordering: a client may pipeline several produce requests for one partition
// (idempotent producers do). The proxy keeps their order by sending every
// request's first attempt from Begin, which the connection calls in the order
// it read the requests, and by the Sender writing requests with equal
// affinity to one broker connection in call order. Waiting, retrying and
// merging happen in Call.Finish, concurrently with later requests, so a
// retried partition waits in the split engine's line of its connection and
// partition (split's order.go) until the earlier requests' parts went out.
package apis

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/apis/hwfloor"
	"github.com/kproxy/kproxy/proxy/apis/produceguard"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/split"
	"github.com/kproxy/kproxy/proxy/crypt"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

// Header is what the proxy read from a client's request header.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
	// Arrival, if not nil, is what the request's frame gave as its bytes
	// arrived: the CRC-32C of any range of it, and the walks of its
	// records (for the requests FrameArrival names); valid only until
	// Begin returns.
	Arrival *recordcheck.Arrival
}

// FrameArrival says whether requests with api key need Header.Arrival:
// Produce, whose batch CRCs and records validation full checks.
func (d *Dispatcher) FrameArrival(key int16) bool {
	return key == int16(kmsg.Produce) && d.pg.Level() == recordcheck.Full
}

// Reply is the answer to one client request.
type Reply struct {
	// Body is the encoded response body, without the response header.
	Body []byte
	// Parts, if not nil, is the body in pieces, written in order without
	// being joined (record batches left in the brokers' answer frames);
	// Body is then nil.
	Parts [][]byte
	// NoResponse is set when Kafka sends nothing back (Produce with acks=0).
	NoResponse bool
	// Release, if not nil, lets the memory of Body or Parts be reused: call
	// it once they are written (or will never be). Not calling it is safe.
	Release func()
}

// Sender forwards requests to brokers (upstream.Pool is the real one).
type Sender interface {
	// Send appends req's body to a request frame and queues it on one of
	// broker's connections. Requests with equal affinity for one broker are
	// written in the order Send was called; requests a broker may hold
	// (req.Hold.Long: long-poll fetches, JoinGroup, SyncGroup) keep that
	// order among themselves on a connection of their own against a broker
	// that answers in order, so that they never hold up other requests.
	// Produce requests always share one ordered path. Send does not keep
	// req.Body after it returns. An error from Send or from the Pending
	// wraps retry.ErrNotSent when the request definitely did not reach the
	// broker; any other error is ambiguous (the broker may have processed
	// it).
	Send(ctx context.Context, broker int32, affinity uint64, req upstream.Request) (Pending, error)
	// ApiVersions returns the API versions broker advertised when the
	// Sender connected to it, connecting if needed: brokers are asked once,
	// by the Sender's own handshake.
	ApiVersions(ctx context.Context, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error)
}

// The request types that cross into the Sender are defined below this
// package, in upstream.
type (
	Body    = upstream.Body
	Raw     = upstream.Raw
	Pending = upstream.Pending
)

// Config configures a Dispatcher. Routes, Sender and AdvertisedHost are
// required; zero values elsewhere pick the documented defaults.
type Config struct {
	Routes *routing.Table
	Sender Sender
	// Retry paces retries of definite failures (zero: retry.DefaultPolicy).
	Retry retry.Policy

	// NodeID, AdvertisedHost and AdvertisedPort are the one broker clients
	// see; every proxy replica advertises the same.
	NodeID         int32
	AdvertisedHost string
	AdvertisedPort int32
	ClusterID      string

	// AutoCreateTopics lets Metadata create unknown topics (when the request
	// allows it) with DefaultPartitions partitions (default 1).
	AutoCreateTopics  bool
	DefaultPartitions int32
	// SCRAM answers DescribeUserScramCredentials and
	// AlterUserScramCredentials (package local); nil: not served.
	SCRAM SCRAMAdmin
	// AutoCreateWait bounds how long Metadata waits for a created topic to
	// appear in the routing table (default 5s).
	AutoCreateWait time.Duration

	// RetryBudget is how long requests without a timeout of their own
	// (group and admin requests, ListOffsets before v10) may retry
	// (default 5s). It is also the floor of produce budgets.
	RetryBudget time.Duration
	// ProbeTimeout bounds asking a new broker for its ApiVersions
	// (default 3s).
	ProbeTimeout time.Duration

	// Quotas, if set, answers DescribeClientQuotas and AlterClientQuotas
	// (the proxy enforces client quotas itself); nil forwards them.
	Quotas QuotaAdmin
	// Authorizer decides what each connection's principal may do (nil:
	// everything, as mode allow-all); AuthzRecorder counts and audits its
	// decisions (nil: not recorded). ACLs answers CreateAcls, DescribeAcls
	// and DeleteAcls (nil: SECURITY_DISABLED, as Kafka without an
	// authorizer).
	Authorizer    *authz.Authorizer
	AuthzRecorder *authz.Recorder
	ACLs          ACLAdmin

	// ProduceValidation is how much of each Produce partition's record
	// data is checked before it is forwarded (recordcheck; the zero value
	// is Full). A refused partition is answered with Kafka's code for its
	// fault, counted in BadInput (kproxy_bad_input_total, shared with the
	// proxy's frame checks; nil: not counted) and logged at most once per
	// reason per BadInputLogInterval (default 10s).
	ProduceValidation recordcheck.Level
	// MaxBatchBytes bounds what a compressed batch may decompress to while
	// it is checked: the largest frame the proxy reads (its
	// --max-frame-bytes; default recordcheck.DefaultMaxBatchBytes).
	MaxBatchBytes       int
	BadInput            *prometheus.CounterVec
	BadInputLogInterval time.Duration
	// Encryption encrypts the record values of the topics it names on
	// produce and decrypts them on fetch (produce.go, fetch.go); nil: none is.
	Encryption *crypt.Service

	// Bufs holds merged answers; the proxy passes the one pool its layers
	// share (nil: the Dispatcher makes its own).
	Bufs       *kwire.BufPool
	Logger     *slog.Logger          // default: discard
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
	Now        func() time.Time      // default time.Now
	// Rand supplies retry jitter; the dispatcher serializes its use. When
	// nil, one is seeded from Seed.
	Rand *rand.Rand
	Seed uint64

	// PerPartitionFetchWait says the brokers answer a Fetch partition by
	// partition, waiting up to MaxWait for each drained one in turn and
	// ignoring MinBytes, as KafScale's do: the proxy then shapes each
	// Fetch sub-request's MaxWait (package fetchwait).
	PerPartitionFetchWait bool
	// PerPartitionProduce says the brokers write the partitions of a
	// Produce one after another, each until it is durable, as KafScale's
	// do (an S3 upload per partition): the proxy then sends each partition
	// as a sub-request of its own (split.Request.PerItem), which the
	// broker works in parallel with the others.
	PerPartitionProduce bool

	// Zones finds each client's zone (package zone): fetches go to brokers
	// of that zone when the routing table routes reads by zone, and
	// kproxy_upstream_bytes_total counts by it. Zero: only the Fetch
	// RackID and client.id tokens name a zone.
	Zones zone.Resolver
}

// answerReply is a split engine answer as a Reply.
func answerReply(a split.Answer, err error) (Reply, error) {
	return Reply{Body: a.Body, Parts: a.Parts, Release: a.Release}, err
}

// Dispatcher answers client requests; it is safe for concurrent use.
type Dispatcher struct {
	cfg    Config
	routes *routing.Table
	sender Sender
	log    *slog.Logger
	now    func() time.Time
	policy retry.Policy
	m      *metrics
	pg     *produceguard.Guard
	vers   *versions
	ids    topicIDs
	floors *hwfloor.Floors     // zone reads' high watermark floors (fetch.go)
	bufs   *kwire.BufPool      // merged answers
	secret [markerLen - 4]byte // starts the markers of vecEncoder

	producePool sync.Pool // *produceOp
	fetchPool   sync.Pool // *fetchOp
	eng         split.Env // what the split engine shares across calls

	authEnv  authrule.Env // what every guard shares (authorized.go)
	anonOnce sync.Once
	anon     *authz.Session

	randMu sync.Mutex
	rnd    *rand.Rand
}

// New checks cfg and returns a Dispatcher. Calls start goroutines that wait
// for long polls; Close joins them.
func New(cfg Config) (*Dispatcher, error) {
	switch {
	case cfg.Routes == nil:
		return nil, errors.New("apis: Config.Routes is required")
	case cfg.Sender == nil:
		return nil, errors.New("apis: Config.Sender is required")
	case cfg.AdvertisedHost == "":
		return nil, errors.New("apis: Config.AdvertisedHost is required")
	case cfg.AdvertisedPort <= 0 || cfg.AdvertisedPort > 65535:
		return nil, fmt.Errorf("apis: Config.AdvertisedPort %d out of range", cfg.AdvertisedPort)
	case cfg.NodeID < 0:
		return nil, fmt.Errorf("apis: Config.NodeID %d is negative", cfg.NodeID)
	}
	if cfg.Retry == (retry.Policy{}) {
		cfg.Retry = retry.DefaultPolicy()
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	setDuration(&cfg.AutoCreateWait, 5*time.Second)
	setDuration(&cfg.RetryBudget, 5*time.Second)
	setDuration(&cfg.ProbeTimeout, 3*time.Second)
	setDuration(&cfg.BadInputLogInterval, defaultBadInputLogInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Bufs == nil {
		cfg.Bufs = new(kwire.BufPool)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	}
	m := newMetrics(cfg.Registerer)
	d := &Dispatcher{
		cfg: cfg, routes: cfg.Routes, sender: cfg.Sender, log: cfg.Logger,
		now: cfg.Now, policy: cfg.Retry, m: m, rnd: cfg.Rand, bufs: cfg.Bufs,
	}
	var err error
	if d.pg, err = newProduceGuard(cfg); err != nil {
		return nil, fmt.Errorf("apis: %w", err)
	}
	d.floors = hwfloor.New(func(id [16]byte) bool { _, ok := d.ids.name(d.routes, id); return ok })
	d.authEnv = authrule.Env{Recorder: cfg.AuthzRecorder, Names: (*idNames)(d)}
	crand.Read(d.secret[:]) // never fails (Go 1.24+)
	d.eng = split.Env{
		Routes: d.routes, Sender: d.sender, Log: d.log, Now: d.now, Backoff: d.backoff, Metrics: m, Bufs: d.bufs,
		ClientZone: d.clientZone,
		Repeatable: repeatable,
	}
	d.vers = newVersions(d)
	d.eng.Version = d.brokerVersion
	return d, nil
}

// Close waits for the goroutines that wait for long polls. Each ends when
// its broker answers or its client connection's context ends, so call Close
// once every client connection is gone or the Sender is closed (which fails
// what is in flight). Begin must not be called after Close.
func (d *Dispatcher) Close() {
	d.eng.Close()
	d.pg.Close()
}

// clientZone is the zone of the client of ctx (split.Env.ClientZone).
func (d *Dispatcher) clientZone(ctx context.Context, rack string, clientID *string) (string, zone.Source) {
	var id, addr string
	if clientID != nil {
		id = *clientID
	}
	if c := ConnInfoFrom(ctx); c != nil {
		addr = c.Client
	}
	return d.cfg.Zones.Of(rack, id, addr)
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Call is one client request between Begin and Finish.
type Call struct {
	reply Reply
	err   error
	op    op // nil when Begin already has the answer
}

// op is a request in flight. finish is called once, from Call.Finish.
type op interface {
	finish(ctx context.Context) (Reply, error)
}

// Begin decodes a request, routes it and sends its first attempts, in the
// order the client connection calls it (see the package comment). The call
// reads body until its Finish returns, so the caller keeps body unchanged
// until then: request bodies are decoded where they were read, not copied,
// and produce record sets are written to brokers from there (Finish returns
// only once those writes ended; see split.VecAdapter).
// conn is the client connection's identity, used as the Sender affinity.
func (d *Dispatcher) Begin(ctx context.Context, conn uint64, h Header, body []byte) *Call {
	c := &Call{}
	if !d.Supported(h.Key, h.Version) {
		c.reply, c.err = d.unsupported(h, body)
		return c
	}
	a := &apiTable[h.Key] // Supported: h.Key is in the table's range
	var err error
	switch {
	case a.begin != nil:
		c.op, c.reply, err = a.begin(d, ctx, conn, h, body)
	case a.serve != nil:
		c.op, c.reply, err = d.serveDecoded(ctx, conn, h, body, a)
	default:
		c.err = fmt.Errorf("no handler for %s v%d", kmsg.NameForKey(h.Key), h.Version)
		return c
	}
	if err != nil {
		c.err = fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	return c
}

// Finish waits for the answers, retries definite failures and returns the
// reply. An error means the client sent something the proxy cannot answer
// (or ctx ended); the connection should then be closed. Finish must be
// called exactly once per Call (with a cancelled ctx if the client is
// gone), so that the call's pooled buffers return.
func (c *Call) Finish(ctx context.Context) (Reply, error) {
	if c.op == nil {
		return c.reply, c.err
	}
	o := c.op
	c.op = nil
	return o.finish(ctx)
}

// Supported says whether the proxy advertises version of API key: what
// kmsg decodes, this package implements and every live broker serves
// (directly or bridged, bridge.go), as of the last ApiVersions answer (broker versions are refreshed then, when
// routing has changed; before the first one, brokers are not counted).
func (d *Dispatcher) Supported(key, version int16) bool {
	r := d.vers.current().get(key)
	return version >= r.min && version <= r.max
}

// unsupported answers a request for a key or version the proxy does not
// advertise: ApiVersions gets Kafka's v0 fallback answer, anything kmsg can
// encode gets its response with UNSUPPORTED_VERSION, anything else closes
// the connection.
func (d *Dispatcher) unsupported(h Header, body []byte) (Reply, error) {
	if h.Key == int16(kmsg.ApiVersions) {
		return d.apiVersionsFallback(), nil
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return Reply{}, fmt.Errorf("unsupported request: key %d (%s) v%d", h.Key, kmsg.NameForKey(h.Key), h.Version)
	}
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return Reply{}, fmt.Errorf("decode unsupported %s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	d.log.Debug("unsupported request version", "api", kmsg.NameForKey(h.Key), "version", h.Version)
	return Reply{Body: refuse(req, apiTable[h.Key].refusal.unsupported).AppendTo(nil)}, nil
}

// backoff is the delay before retry number attempt (1 = first retry).
func (d *Dispatcher) backoff(attempt int, deadline time.Time) (time.Duration, bool) {
	d.randMu.Lock()
	defer d.randMu.Unlock()
	return d.policy.Next(attempt, d.now(), deadline, d.rnd)
}

// getBuf returns an empty pooled buffer of capacity at least n.
func (d *Dispatcher) getBuf(n int) *[]byte { return d.bufs.Get(n) }

// closed reports whether a Changed channel has fired.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
