package apis

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
)

// vecSub is one sub-request as vecSender saw it.
type vecSub struct {
	skel   []byte   // AppendVec's, after "hdr"
	pieces [][]byte // nil: skel holds it all
	whole  []byte   // AppendBody's: kmsg's own encoding
}

// vecSender is a fakeSender that also encodes each sub-request in pieces
// after a fake header, and whole, and checks VecSizeHint against the
// skeleton.
type vecSender struct {
	*fakeSender
	fallback bool // encodings fall back to whole: the hint may be short
	mu       sync.Mutex
	subs     []vecSub
}

func (s *vecSender) Send(ctx context.Context, broker int32, aff uint64, req upstream.Request) (Pending, error) {
	vb := req.Body.(upstream.VecBody)
	skel, pieces := vb.AppendVec([]byte("hdr"))
	sub := vecSub{pieces: pieces, whole: req.Body.AppendBody(nil)}
	if string(skel[:3]) != "hdr" {
		s.t.Errorf("AppendVec clobbered the header: %q", skel[:3])
	}
	sub.skel = skel[3:]
	if hint := vb.VecSizeHint(); len(sub.skel) > hint && !s.fallback {
		s.t.Errorf("skeleton of %d bytes over its size hint %d: the pooled frame grows", len(sub.skel), hint)
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return s.fakeSender.Send(ctx, broker, aff, req)
}

// vecProduce builds a produce of version v: one partition of topic per
// size, with every optional field the version has.
func vecProduce(v int16, acks int16, topic string, sizes []int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, acks, 5000
	txn := "txn-1"
	req.TransactionID = &txn
	t := kmsg.ProduceRequestTopic{Topic: topic, TopicID: topicID(topic)}
	for i, n := range sizes {
		p := kmsg.ProduceRequestTopicPartition{Partition: int32(i)}
		if n >= 0 { // -1: null records
			p.Records = bytes.Repeat([]byte{byte(i + 1)}, n)
		}
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	return req
}

// TestProduceEncodeVecMatchesKmsg: for every Produce version, each
// sub-request's pieces joined are byte for byte kmsg's encoding of it, and
// each record set of vecMinBytes or more is a piece that is the client's
// own bytes (not a copy); acks=0 produces are encoded whole.
func TestProduceEncodeVecMatchesKmsg(t *testing.T) {
	for v := int16(3); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		for _, tc := range []struct {
			name  string
			topic string // "t": partitions on brokers 1-3; "u": all on broker 2 (forwarded whole)
			acks  int16
			sizes []int
			lent  int // pieces that must be the client's bytes
		}{
			{"split mixed", "t", -1, []int{-1, 10, vecMinBytes - 1, vecMinBytes, 70_000, 200_000, 0, 5}, 3},
			{"split small", "t", 1, []int{10, 20, 30}, 0},
			{"whole", "u", -1, []int{vecMinBytes, 100}, 1},
			{"whole small", "u", -1, []int{100}, 0},
			{"acks=0", "t", 0, []int{vecMinBytes, 70_000, 10}, 0},
		} {
			t.Run(fmt.Sprintf("v%d/%s", v, tc.name), func(t *testing.T) {
				s := &vecSender{fakeSender: newFake(t)}
				cfg := testConfig(testTable(), s.fakeSender)
				cfg.Sender = s
				d, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				req := vecProduce(v, tc.acks, tc.topic, tc.sizes)
				body := req.AppendTo(nil)
				var client kmsg.ProduceRequest // its record sets alias body
				client.Version = v
				if err := client.UnsafeReadFrom(body); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := d.Begin(ctx, 42, Header{Key: req.Key(), Version: v}, body).Finish(ctx); err != nil {
					t.Fatal(err)
				}
				own := [][]byte{body}
				for _, p := range client.Topics[0].Partitions {
					own = append(own, p.Records)
				}
				checkVecSubs(t, s.subs, own, tc.lent)
			})
		}
	}
}

// checkVecSubs checks that each sub-request's pieces join into kmsg's
// encoding and that wantLent of them are the client's own bytes (its whole
// body or a record set: same first byte in memory, not a copy).
func checkVecSubs(t *testing.T, subs []vecSub, own [][]byte, wantLent int) {
	t.Helper()
	if len(subs) == 0 {
		t.Fatal("no sub-request sent")
	}
	lent := 0
	for i, sub := range subs {
		got := sub.skel
		if sub.pieces != nil {
			got = bytes.Join(sub.pieces, nil)
		}
		if !bytes.Equal(got, sub.whole) {
			t.Fatalf("sub-request %d: pieces joined (%d bytes) differ from kmsg's encoding (%d bytes)", i, len(got), len(sub.whole))
		}
		for _, p := range sub.pieces {
			for _, o := range own {
				if len(p) > 0 && len(p) == len(o) && &p[0] == &o[0] {
					lent++
				}
			}
		}
	}
	if lent != wantLent {
		t.Fatalf("%d pieces are the client's own bytes, want %d", lent, wantLent)
	}
}

// TestProduceEncodeVecFallback: when a marker is not where the encoding
// must put it (here inline record data holds the process's marker, which
// only a test knows), the sub-request is encoded whole, still exactly.
func TestProduceEncodeVecFallback(t *testing.T) {
	for _, v := range []int16{8, 9} { // before and after flexible versions
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			s := &vecSender{fakeSender: newFake(t)}
			cfg := testConfig(testTable(), s.fakeSender)
			cfg.Sender = s
			d, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			copy(d.secret[:], "0123456789ab")
			s.fallback = true
			req := vecProduce(v, -1, "t", []int{0, 10, 10, vecMinBytes}) // partitions 0 and 3 on broker 1
			req.Topics[0].Partitions[0].Records = append([]byte("xxxx0123456789ab"), 0, 0, 0, 0)
			if _, err := call(t, d, req); err != nil {
				t.Fatal(err)
			}
			checkVecSubs(t, s.subs, nil, 0)
		})
	}
}

// lendingSender is a fakeSender whose Pendings hold lent pieces until the
// test gives them back.
type lendingSender struct {
	*fakeSender
	reclaiming chan struct{} // a Reclaim started
	giveBack   chan struct{} // one Reclaim returns per receive
}

type lendingPending struct {
	Pending
	s *lendingSender
}

func (p lendingPending) Reclaim() {
	p.s.reclaiming <- struct{}{}
	<-p.s.giveBack
}

func (s *lendingSender) Send(ctx context.Context, broker int32, aff uint64, req upstream.Request) (Pending, error) {
	p, err := s.fakeSender.Send(ctx, broker, aff, req)
	if err != nil {
		return nil, err
	}
	return lendingPending{Pending: p, s: s}, nil
}

// TestProduceFinishWaitsForReclaim: Finish returns only once every
// sub-request gave its pieces back, answered or abandoned (the client
// connection reuses the request frame as soon as Finish returns).
func TestProduceFinishWaitsForReclaim(t *testing.T) {
	for _, tc := range []struct {
		name      string
		abandoned bool // the client connection's context ends first
	}{{"answered", false}, {"abandoned", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &lendingSender{fakeSender: newFake(t), reclaiming: make(chan struct{}), giveBack: make(chan struct{})}
			cfg := testConfig(testTable(), s.fakeSender)
			cfg.Sender = s
			d, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := vecProduce(9, -1, "t", []int{vecMinBytes, vecMinBytes, vecMinBytes}) // brokers 1, 2, 3
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := d.Begin(ctx, 42, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil))
			if tc.abandoned {
				cancel()
			}
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				_, _ = c.Finish(ctx)
			}()
			for i := range 3 { // reclaimed one after another
				select {
				case <-s.reclaiming:
				case <-finished:
					t.Fatalf("Finish returned after %d of 3 sub-requests were reclaimed", i)
				case <-time.After(10 * time.Second):
					t.Fatalf("only %d of 3 sub-requests reclaimed", i)
				}
				select {
				case <-finished:
					t.Fatal("Finish returned while a sub-request's pieces were still lent")
				default:
				}
				s.giveBack <- struct{}{}
			}
			select {
			case <-finished:
			case <-time.After(10 * time.Second):
				t.Fatal("Finish did not return once the pieces were given back")
			}
		})
	}
}
