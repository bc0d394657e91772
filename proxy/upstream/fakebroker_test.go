package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
)

// received is one request a fakeBroker decoded.
type received struct {
	conn     int // index of the connection in accept order
	key      int16
	version  int16
	corr     int32
	clientID string
	req      kmsg.Request
	fb       *fakeBroker
	w        *fakeConn
	answered chan struct{} // closed by reply
	once     sync.Once
}

// reply answers the request (in any order relative to others, unless the
// broker answers in order: it reads nothing more from that connection until
// the reply).
func (r *received) reply(resp kmsg.Response) {
	r.w.write(r, resp)
	r.once.Do(func() { close(r.answered) })
}

// processed tells an in-order broker that it is done with a request it
// does not answer (acks=0): it reads the connection's next one.
func (r *received) processed() { r.once.Do(func() { close(r.answered) }) }

// replyEmpty answers with the request's response kind, all fields default.
func (r *received) replyEmpty() { r.reply(r.req.ResponseKind()) }

// fakeBroker is a tiny Kafka broker for tests: it decodes every frame with
// kmsg, answers ApiVersions itself and hands other requests to the test
// through a channel, so the test decides when and in which order to answer.
// By default it advertises layout.UnorderedResponsesFeature and lets the test answer in any
// order; an in-order one (newInOrderFakeBroker) advertises nothing and, like
// Kafka, reads a connection's next request only once the previous one is
// answered.
type fakeBroker struct {
	t       testing.TB
	ln      net.Listener
	inOrder bool
	flex    kwire.FlexTable
	quit    chan struct{} // closed by close: in-order conns stop waiting

	reqs      chan *received                // every non-ApiVersions request
	hellos    chan *kmsg.ApiVersionsRequest // each connection's first ApiVersions, its handshake
	barriers  chan int                      // connection index of every later ApiVersions (confirm.go)
	closed    chan int                      // conn index, when a conn reads EOF or an error
	holdHello chan struct{}
	rcvBuf    int // if set, each connection's socket receive buffer (no autotuning); under mu

	mu    sync.Mutex
	conns []*fakeConn
	wg    sync.WaitGroup
}

type fakeConn struct {
	idx int
	nc  net.Conn
	mu  sync.Mutex // serializes response writes
}

func newFakeBroker(t testing.TB) *fakeBroker { return newFakeBrokerHolding(t, nil) }

// newInOrderFakeBroker answers one request at a time per connection.
func newInOrderFakeBroker(t testing.TB) *fakeBroker { return startFakeBroker(t, nil, true) }

// newStallingFakeBroker is an in-order fake broker with small socket
// receive buffers: while it holds a request unanswered, a large write to
// it blocks.
func newStallingFakeBroker(t testing.TB) *fakeBroker {
	fb := startFakeBroker(t, nil, true)
	fb.mu.Lock()
	fb.rcvBuf = 64 << 10
	fb.mu.Unlock()
	return fb
}

// newFakeBrokerHolding answers each ApiVersions only after receiving from
// hold (nil: at once), which keeps a connection in its handshake.
func newFakeBrokerHolding(t testing.TB, hold chan struct{}) *fakeBroker {
	return startFakeBroker(t, hold, false)
}

func startFakeBroker(t testing.TB, hold chan struct{}, inOrder bool) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	fb := &fakeBroker{t: t, ln: ln, flex: kwire.NewFlexTable(), inOrder: inOrder, quit: make(chan struct{}), reqs: make(chan *received, 4096), hellos: make(chan *kmsg.ApiVersionsRequest, 64), barriers: make(chan int, 64), closed: make(chan int, 64), holdHello: hold}
	fb.wg.Add(1)
	go fb.accept()
	t.Cleanup(fb.close)
	return fb
}

func (fb *fakeBroker) addr() string { return fb.ln.Addr().String() }

func (fb *fakeBroker) accept() {
	defer fb.wg.Done()
	for {
		nc, err := fb.ln.Accept()
		if err != nil {
			return
		}
		fb.mu.Lock()
		if fb.rcvBuf > 0 {
			_ = nc.(*net.TCPConn).SetReadBuffer(fb.rcvBuf)
		}
		c := &fakeConn{idx: len(fb.conns), nc: nc}
		fb.conns = append(fb.conns, c)
		fb.mu.Unlock()
		fb.wg.Add(1)
		go fb.serve(c)
	}
}

// kill closes the connection with index idx.
func (fb *fakeBroker) kill(idx int) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.conns[idx].nc.Close()
}

func (fb *fakeBroker) close() {
	if fb.quit != nil {
		select {
		case <-fb.quit:
		default:
			close(fb.quit)
		}
	}
	fb.ln.Close()
	fb.mu.Lock()
	for _, c := range fb.conns {
		c.nc.Close()
	}
	fb.mu.Unlock()
	fb.wg.Wait()
}

func (fb *fakeBroker) serve(c *fakeConn) {
	defer fb.wg.Done()
	defer func() { fb.closed <- c.idx }()
	br := bufio.NewReader(c.nc)
	shook := false
	for {
		r, err := fb.readRequest(c, br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				fb.t.Logf("fake broker conn %d: %v", c.idx, err)
			}
			c.nc.Close()
			return
		}
		if hello, ok := r.req.(*kmsg.ApiVersionsRequest); ok {
			if fb.holdHello != nil {
				<-fb.holdHello
			}
			if shook {
				fb.barriers <- c.idx
			} else {
				fb.hellos <- hello
			}
			shook = true
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = r.version
			resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 0, MaxVersion: 12}}
			if !fb.inOrder {
				f := kmsg.NewApiVersionsResponseSupportedFeature()
				f.Name, f.MinVersion, f.MaxVersion = layout.UnorderedResponsesFeature, 1, 1
				resp.SupportedFeatures = append(resp.SupportedFeatures, f)
			}
			c.write(r, resp)
			continue
		}
		fb.reqs <- r
		if fb.inOrder {
			select {
			case <-r.answered:
			case <-fb.quit:
				c.nc.Close()
				return
			}
		}
	}
}

func (fb *fakeBroker) readRequest(c *fakeConn, br *bufio.Reader) (*received, error) {
	frame, err := kwire.ReadFrame(br, 8, 1<<30, nil)
	if err != nil {
		return nil, err
	}
	buf := *frame
	h, err := kwire.ParseRequestHeader(buf, fb.flex)
	if err != nil {
		return nil, err
	}
	r := &received{conn: c.idx, fb: fb, w: c, answered: make(chan struct{})}
	r.key, r.version, r.corr, r.clientID = h.Key, h.Version, h.Corr, string(h.ClientID)
	body := buf[h.BodyOff:]
	r.req = kmsg.RequestForKey(r.key)
	if r.req == nil {
		return nil, errors.New("unknown key")
	}
	r.req.SetVersion(r.version)
	if err := r.req.ReadFrom(body); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *fakeConn) write(r *received, resp kmsg.Response) {
	resp.SetVersion(r.version)
	frame := kwire.AppendResponseHeader(nil, r.corr, kwire.ResponseHeaderFlexible(r.key, resp.IsFlexible()))
	frame = resp.AppendTo(frame)
	kwire.FinishFrame(frame)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nc.Write(frame) //nolint:errcheck // the proxy side may be gone; tests check what arrives
}

// metadataReq builds a Metadata request naming one topic; the fake's answer
// echoes it, which lets tests match responses to requests.
func metadataReq(version int16, topic string) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	return req.AppendTo(nil)
}

func topicOf(r *received) string {
	return *r.req.(*kmsg.MetadataRequest).Topics[0].Topic
}

// echo answers a Metadata request with a response naming the same topic.
func echo(r *received) {
	resp := kmsg.NewPtrMetadataResponse()
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(topicOf(r))
	resp.Topics = append(resp.Topics, t)
	r.reply(resp)
}

func decodeTopic(t testing.TB, version int16, body []byte) string {
	t.Helper()
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode metadata response v%d: %v", version, err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil {
		t.Fatalf("unexpected response %+v", resp)
	}
	return *resp.Topics[0].Topic
}
