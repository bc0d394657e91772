package split

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/routing"
)

// toy is the smallest adapter: a request is a list of partitions of topic
// "t" (one byte each), a sub-request the same for a subset, and a broker's
// answer one (partition, code) pair of bytes per partition asked.
type toy struct {
	s       Engine
	parts   []byte
	answers []int16
}

func (a *toy) Encode(dst []byte, idx []int32, _ int) []byte {
	for _, i := range idx {
		dst = append(dst, a.parts[i])
	}
	return dst
}

func (a *toy) Absorb(body []byte, si int) (bool, error) {
	m := a.s.Matcher(si)
	for ; len(body) >= 2; body = body[2:] {
		if i := m.Find("t", [16]byte{}, false, int32(body[0])); i >= 0 {
			a.answers[i] = int16(int8(body[1]))
			a.s.Answered(i, a.answers[i])
		}
	}
	return true, nil
}

func (a *toy) Fail(i int32, code int16) { a.answers[i] = code }

func (a *toy) Merge(dst []byte) []byte {
	for _, c := range a.answers {
		dst = binary.BigEndian.AppendUint16(dst, uint16(c))
	}
	return dst
}

// toySender answers each partition with code 0, except that broker 1
// refuses partition 0 (NOT_LEADER) once, after which routing moves it.
type toySender struct {
	mu      sync.Mutex
	routes  *routing.Table
	refused bool
	sent    map[int32][][]byte
}

type done []byte

func (d done) Wait(context.Context) ([]byte, error) { return d, nil }
func (d done) Release()                             {}

func (f *toySender) Send(_ context.Context, broker int32, _ uint64, req upstream.Request) (upstream.Pending, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body := req.Body.AppendBody(nil)
	f.sent[broker] = append(f.sent[broker], body)
	var answer []byte
	for _, p := range body {
		code := int8(0)
		if broker == 1 && p == 0 && !f.refused {
			f.refused, code = true, int8(kerr.NotLeaderForPartition.Code)
			f.routes.SetOwner("t", 0, 2)
		}
		answer = append(answer, p, byte(code))
	}
	return done(answer), nil
}

type noMetrics struct{}

func (noMetrics) Split(int16, int)               {}
func (noMetrics) Retried(int16, int16, error)    {}
func (noMetrics) Early()                         {}
func (noMetrics) Read(routing.Read, zone.Source) {}
func (noMetrics) Upstream(int16, string, int)    {}

// TestToyAdapter: the contract alone is enough for an adapter: items are
// split per owner, a refused item is retried on its new owner, and the
// merge is in the client's order.
func TestToyAdapter(t *testing.T) {
	rt := routing.NewTable()
	for id := int32(1); id <= 2; id++ {
		rt.SetBroker(routing.Broker{ID: id, Addr: "b:9092"})
	}
	rt.SetTopic(routing.Topic{Name: "t", Partitions: 4})
	for p := int32(0); p < 4; p++ {
		rt.SetOwner("t", p, 1+p%2)
	}
	snd := &toySender{routes: rt, sent: map[int32][][]byte{}}
	env := &Env{
		Routes: rt, Sender: snd, Log: slog.New(slog.DiscardHandler), Now: time.Now, Metrics: noMetrics{},
		Backoff: func(attempt int, _ time.Time) (time.Duration, bool) { return 0, attempt < 3 },
		Bufs:    &kwire.BufPool{},
		// ListOffsets' row: repeatable, so that nothing is ambiguous.
		Repeatable: func(key int16) bool { return key == 2 },
	}
	defer env.Close()
	a := &toy{parts: []byte{0, 1, 2, 3}, answers: make([]int16, 4)}
	a.s.Init(env, a, Request{Key: 2, Deadline: time.Now().Add(time.Minute)})
	a.s.Reserve(len(a.parts))
	for i, p := range a.parts {
		a.s.Add("t", [16]byte{}, int32(p), 0, int32(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.s.Dispatch(ctx, nil)
	ans, err := a.s.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 0, 0, 0, 0, 0}; string(ans.Body) != string(want) {
		t.Fatalf("merged %v, want every partition answered 0 in order", ans.Body)
	}
	if got := len(snd.sent[1]) + len(snd.sent[2]); got != 3 {
		t.Fatalf("%d sub-requests (%v), want one per broker and the retry", got, snd.sent)
	}
	if last := snd.sent[2][len(snd.sent[2])-1]; string(last) != string([]byte{0}) {
		t.Fatalf("retry to broker 2 asked for %v, want partition 0 alone", last)
	}
}
