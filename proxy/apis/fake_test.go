package apis

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

// fakeReply is what a fake broker does with one request.
type fakeReply struct {
	resp    kmsg.Response // answer (nil: the default answer)
	err     error         // Wait fails with err (ambiguous unless it wraps retry.ErrNotSent)
	sendErr error         // Send fails with sendErr
	idle    bool          // Wait blocks until its ctx ends (a long poll with nothing to say)
	gate    chan struct{} // Wait answers only once gate is closed
}

// script decides a broker's reply to its n-th request (from 0) of one API.
type script func(n int, req kmsg.Request) fakeReply

// sent is one request the fake received.
type sent struct {
	broker   int32
	clientID *string
	key      int16
	ver      int16
	body     []byte
	req      kmsg.Request
}

// fakeSender is a Sender whose brokers decode every request with kmsg (so
// a badly encoded sub-request fails the test) and answer from scripts.
type fakeSender struct {
	t        testing.TB
	mu       sync.Mutex
	sent     []sent
	scripts  map[int32]map[int16]script
	counts   map[int32]map[int16]int
	idleEnd  chan error // errors with which idle waits ended
	freed    chan int32 // brokers whose answers were released
	answered chan int32 // brokers whose Wait returned an answer
	waits    int        // Wait calls
	// versions answers ApiVersions probes per broker (nil: all of kmsg).
	versions map[int32]map[int16]vrange
}

func newFake(t testing.TB) *fakeSender {
	return &fakeSender{
		t: t, scripts: map[int32]map[int16]script{}, counts: map[int32]map[int16]int{},
		idleEnd: make(chan error, 64), freed: make(chan int32, 256), answered: make(chan int32, 256),
		versions: map[int32]map[int16]vrange{},
	}
}

func (f *fakeSender) on(broker int32, key kmsg.Key, s script) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.scripts[broker] == nil {
		f.scripts[broker] = map[int16]script{}
	}
	f.scripts[broker][int16(key)] = s
}

func (f *fakeSender) Send(_ context.Context, broker int32, _ uint64, ur upstream.Request) (Pending, error) {
	key, version, clientID, body := ur.Key, ur.Version, ur.ClientID, ur.Body
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	cp := joinBody(body)
	if err := req.ReadFrom(cp); err != nil {
		f.t.Errorf("broker %d got undecodable %s v%d: %v", broker, kmsg.NameForKey(key), version, err)
	}
	f.mu.Lock()
	f.sent = append(f.sent, sent{broker: broker, clientID: clientID, key: key, ver: version, body: cp, req: req})
	if f.counts[broker] == nil {
		f.counts[broker] = map[int16]int{}
	}
	n := f.counts[broker][key]
	f.counts[broker][key]++
	s := f.scripts[broker][key]
	f.mu.Unlock()
	var r fakeReply
	if s != nil {
		r = s(n, req)
	}
	if r.sendErr != nil {
		return nil, r.sendErr
	}
	if r.resp == nil && r.err == nil && !r.idle {
		r.resp = f.okResponse(broker, req)
	}
	return &fakePending{f: f, r: r, broker: broker}, nil
}

// joinBody encodes body as a real Sender writes it: in pieces, when it is
// a VecBody that leaves some out.
func joinBody(body upstream.Body) []byte {
	vb, ok := body.(upstream.VecBody)
	if !ok {
		return body.AppendBody(nil)
	}
	skel, pieces := vb.AppendVec(nil)
	if pieces == nil {
		return skel
	}
	return bytes.Join(pieces, nil)
}

type fakePending struct {
	f        *fakeSender
	broker   int32
	r        fakeReply
	body     []byte // what Wait returned
	released bool
}

// Release scribbles over the answer it gave, as a reused buffer would be
// overwritten, so that a merge that still reads it, or a client answer that
// aliases it, fails the test.
func (p *fakePending) Release() {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	switch {
	case p.released:
		p.f.t.Errorf("a broker answer was released twice")
	case p.body == nil:
		p.f.t.Errorf("a broker answer was released before Wait returned it")
	}
	p.released = true
	for i := range p.body {
		p.body[i] = 0xEE
	}
	select {
	case p.f.freed <- p.broker:
	default:
	}
}

func (p *fakePending) Wait(ctx context.Context) ([]byte, error) {
	p.f.mu.Lock()
	p.f.waits++
	p.f.mu.Unlock()
	if p.r.idle {
		<-ctx.Done()
		p.f.idleEnd <- ctx.Err()
		return nil, fmt.Errorf("idle broker: %w", ctx.Err())
	}
	if p.r.gate != nil {
		select {
		case <-p.r.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if p.r.err != nil {
		return nil, p.r.err
	}
	body := p.r.resp.AppendTo(nil)
	p.f.mu.Lock()
	p.body = body
	p.f.mu.Unlock()
	select {
	case p.f.answered <- p.broker:
	default:
	}
	return body, nil
}

// requests returns what was sent for key, in order.
func (f *fakeSender) requests(key kmsg.Key) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, s := range f.sent {
		if s.key == int16(key) {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeSender) count(broker int32, key kmsg.Key) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[broker][int16(key)]
}

// value is what a fake broker reports for a partition it answers (as an
// offset, watermark, ...), so tests can tell which broker answered.
func value(broker, part int32) int64 { return int64(broker)*1000 + int64(part) }

// okResponse answers req successfully, echoing what it asked about.
func (f *fakeSender) okResponse(broker int32, req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.BaseOffset = p.Partition, value(broker, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.HighWatermark = p.Partition, value(broker, p.Partition)
				rp.PreferredReadReplica = -1
				rp.RecordBatches = []byte{byte(broker), byte(p.Partition), 1, 2, 3}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.ListOffsetsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.Offset = p.Partition, value(broker, p.Partition)
				rp.OldStyleOffsets = []int64{rp.Offset}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetForLeaderEpochRequest:
		resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range r.Topics {
			rt := kmsg.OffsetForLeaderEpochResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.EndOffset, rp.LeaderEpoch = p.Partition, value(broker, p.Partition), 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteRecordsRequest:
		resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, t := range r.Topics {
			rt := kmsg.DeleteRecordsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark = p.Partition, value(broker, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.Groups = []kmsg.ListGroupsResponseGroup{{Group: fmt.Sprintf("g-b%d", broker)}, {Group: "shared"}}
		return resp
	case *kmsg.ApiVersionsRequest:
		return f.apiVersions(broker, r)
	}
	// Everything else: mirror the request with no errors, and mark
	// group answers with the broker that gave them.
	resp := answer.ErrorResponse(req, 0)
	if dg, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
		for i := range dg.Groups {
			dg.Groups[i].State = fmt.Sprintf("b%d", broker)
		}
	}
	return resp
}

// ApiVersions asks broker with an ApiVersions request, as a Sender's
// handshake does, so that scripts and counts see it.
func (f *fakeSender) ApiVersions(ctx context.Context, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error) {
	return askApiVersions(ctx, f, broker)
}

// askApiVersions sends ApiVersions v3 through s and decodes the answer.
func askApiVersions(ctx context.Context, s Sender, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	p, err := s.Send(ctx, broker, 0, upstream.Request{Key: req.Key(), Version: 3, Body: Raw(req.AppendTo(nil))})
	if err != nil {
		return nil, err
	}
	body, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(resp.ErrorCode)
	}
	return resp.ApiKeys, nil
}

func (f *fakeSender) apiVersions(broker int32, r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	f.mu.Lock()
	limits := f.versions[broker]
	f.mu.Unlock()
	for k := range int16(numKeys) {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		vr := vrange{0, req.MaxVersion()}
		if l, ok := limits[k]; ok {
			vr = l
		}
		if vr.ok() {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: vr.min, MaxVersion: vr.max})
		}
	}
	return resp
}

// testTable routes topic "t" (16 partitions) over brokers 1-3: partition p
// is owned by broker 1+p%3 at epoch 5. Topic "u" (4 partitions) lives on
// broker 2 only. Group g<n> is coordinated by broker 1+n%3.
func testTable() *routing.Table {
	rt := routing.NewTable()
	for id := int32(1); id <= 3; id++ {
		rt.SetBroker(routing.Broker{ID: id, Addr: fmt.Sprintf("b%d:9092", id)})
	}
	rt.SetTopic(routing.Topic{Name: "t", ID: topicID("t"), Partitions: 16})
	for p := int32(0); p < 16; p++ {
		rt.SetOwner("t", p, 1+p%3)
		rt.SetEpoch("t", p, 5)
	}
	rt.SetTopic(routing.Topic{Name: "u", ID: topicID("u"), Partitions: 4})
	for p := int32(0); p < 4; p++ {
		rt.SetOwner("u", p, 2)
	}
	for n := int32(0); n < 6; n++ {
		rt.SetCoordinator(fmt.Sprintf("g%d", n), 1+n%3)
	}
	return rt
}

func topicID(name string) (id [16]byte) {
	copy(id[:], "id-"+name)
	return id
}

// owner is testTable's owner of a partition of "t" or "u".
func owner(topic string, p int32) int32 {
	if topic == "u" {
		return 2
	}
	return 1 + p%3
}

const proxyID = 7

func testConfig(rt *routing.Table, f *fakeSender) Config {
	return Config{
		Routes: rt, Sender: f, NodeID: proxyID, AdvertisedHost: "proxy.local", AdvertisedPort: 9092,
		ClusterID: "kproxy-test", Registerer: prometheus.NewRegistry(),
		Retry:  retry.Policy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 2, MaxAttempts: 5},
		Logger: testLogger(),
		// These tests are about routing, splitting and encoding, with record
		// sets that are markers, not batches; producecheck_test.go turns
		// validation on.
		ProduceValidation: recordcheck.Off,
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("APIS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func newTestDispatcher(t testing.TB, mutate ...func(*Config)) (*Dispatcher, *fakeSender, *routing.Table) {
	t.Helper()
	f := newFake(t)
	rt := testTable()
	cfg := testConfig(rt, f)
	for _, m := range mutate {
		m(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d, f, rt
}

// call runs one request through Begin and Finish. It scribbles over the
// request body once Finish returns, as the connection reuses it then, so
// that a reply still referencing it shows.
func call(t testing.TB, d *Dispatcher, req kmsg.Request) (Reply, error) {
	t.Helper()
	body := req.AppendTo(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := d.Begin(ctx, 42, Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 1}, body)
	reply, err := c.Finish(ctx)
	for i := range body {
		body[i] = 0xAA
	}
	return reply, err
}

// roundTrip is call plus decoding the reply at the request's version and
// checking that it re-encodes to the same bytes.
func roundTrip(t testing.TB, d *Dispatcher, req kmsg.Request) kmsg.Response {
	t.Helper()
	reply, err := call(t, d, req)
	if err != nil {
		t.Fatalf("%s v%d: Finish: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return decodeReply(t, req, replyBytes(reply))
}

func decodeReply(t testing.TB, req kmsg.Request, body []byte) kmsg.Response {
	t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d: decode reply: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if again := resp.AppendTo(nil); string(again) != string(body) {
		t.Fatalf("%s v%d: reply does not round-trip (%d vs %d bytes)", kmsg.NameForKey(req.Key()), req.GetVersion(), len(again), len(body))
	}
	return resp
}

// replyBytes is a reply's body, joined if it came in pieces.
func replyBytes(r Reply) []byte {
	if r.Parts == nil {
		return r.Body
	}
	return bytes.Join(r.Parts, nil)
}
