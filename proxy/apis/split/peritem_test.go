package split

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/routing"
)

// affSender answers every partition with code 0 and records each
// sub-request's affinity and partitions.
type affSender struct {
	mu      sync.Mutex
	sent    []affSent
	refuse  byte // refused once with NOT_LEADER, if refuses
	refuses bool
}

type affSent struct {
	aff   uint64
	parts string
}

func (f *affSender) Send(_ context.Context, _ int32, aff uint64, req upstream.Request) (upstream.Pending, error) {
	body := req.Body.AppendBody(nil)
	f.mu.Lock()
	f.sent = append(f.sent, affSent{aff, string(body)})
	f.mu.Unlock()
	var answer []byte
	for _, p := range body {
		code := byte(0)
		if f.refuses && p == f.refuse {
			f.refuses, code = false, byte(int8(kerr.NotLeaderForPartition.Code))
		}
		answer = append(answer, p, code)
	}
	return done(answer), nil
}

// TestPerItem: with Request.PerItem every partition goes alone, with an
// affinity that one client connection's requests for that partition share
// and that differs between partitions and between connections; without it
// one sub-request per broker carries the connection's own affinity.
func TestPerItem(t *testing.T) {
	rt := routing.NewTable()
	rt.SetBroker(routing.Broker{ID: 1, Addr: "b:9092"})
	rt.SetTopic(routing.Topic{Name: "t", Partitions: 3})
	for p := int32(0); p < 3; p++ {
		rt.SetOwner("t", p, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(t *testing.T, perItem bool, conn uint64, refuse ...byte) []affSent {
		snd := &affSender{refuses: len(refuse) > 0}
		if snd.refuses {
			snd.refuse = refuse[0]
		}
		env := &Env{Routes: rt, Sender: snd, Log: slog.New(slog.DiscardHandler), Now: time.Now, Metrics: noMetrics{},
			Backoff: func(attempt int, _ time.Time) (time.Duration, bool) { return 0, attempt < 3 }, Bufs: &kwire.BufPool{}}
		defer env.Close()
		a := &toy{parts: []byte{0, 1, 2}, answers: []int16{-1, -1, -1}}
		a.s.Init(env, a, Request{Key: 0, Conn: conn, Deadline: time.Now().Add(time.Minute), PerItem: perItem})
		a.s.Reserve(len(a.parts))
		for i, p := range a.parts {
			a.s.Add("t", [16]byte{}, int32(p), 0, int32(i))
		}
		a.s.Dispatch(ctx, nil)
		if _, err := a.s.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		for i, c := range a.answers {
			if c != 0 {
				t.Fatalf("partition %d answered %d, want 0", i, c)
			}
		}
		return snd.sent
	}
	t.Run("off", func(t *testing.T) {
		sent := run(t, false, 7)
		if len(sent) != 1 || sent[0].aff != 7 || sent[0].parts != "\x00\x01\x02" {
			t.Fatalf("sent %+v, want one sub-request of every partition with affinity 7", sent)
		}
	})
	t.Run("on", func(t *testing.T) {
		first, again, other := run(t, true, 7), run(t, true, 7), run(t, true, 8)
		if len(first) != 3 {
			t.Fatalf("sent %+v, want a sub-request per partition", first)
		}
		seen := map[uint64]bool{}
		for i, s := range first {
			if s.parts != string([]byte{byte(i)}) {
				t.Errorf("sub-request %d asked for %q, want partition %d alone", i, s.parts, i)
			}
			if seen[s.aff] {
				t.Errorf("partition %d shares affinity %d with another partition", i, s.aff)
			}
			seen[s.aff] = true
			if again[i].aff != s.aff {
				t.Errorf("partition %d: affinity %d, then %d for the same connection", i, s.aff, again[i].aff)
			}
			if other[i].aff == s.aff {
				t.Errorf("partition %d: connections 7 and 8 share affinity %d", i, s.aff)
			}
		}
	})
	t.Run("retry keeps the affinity", func(t *testing.T) {
		sent := run(t, true, 7, 1)
		if len(sent) != 4 || sent[3].parts != "\x01" || sent[3].aff != sent[1].aff {
			t.Fatalf("sent %+v, want partition 1 retried alone with its first attempt's affinity", sent)
		}
	})
}
