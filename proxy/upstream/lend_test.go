package upstream

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// lentBody is a produce body whose record set is lent to the pool: it is
// written from lent, not copied into the frame.
type lentBody struct{ head, lent []byte }

func (b lentBody) AppendBody(dst []byte) []byte { return append(append(dst, b.head...), b.lent...) }
func (b lentBody) SizeHint() int                { return len(b.head) + len(b.lent) }
func (b lentBody) VecSizeHint() int             { return len(b.head) }
func (b lentBody) AppendVec(dst []byte) ([]byte, [][]byte) {
	n := len(dst)
	skel := append(dst, b.head...)
	return skel, [][]byte{skel[n:], b.lent}
}

// newLentProduce builds a v8 produce (records last, no tagged fields) of
// one partition holding records, which stay in their own memory.
func newLentProduce(topic string, records []byte) lentBody {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 8, -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Records: records}}}}
	full := req.AppendTo(nil)
	return lentBody{head: full[:len(full)-len(records)], lent: records}
}

func stateOf(r *wireReq) uint8 {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.state
}

// TestReclaimWaitsForTheWrite: a produce whose records are lent to the pool
// is abandoned (its Wait gives up) while its write is blocked by a broker
// that reads nothing. Reclaim returns only once the write ended, so the
// memory scribbled on right after never reaches the broker; a request
// queued behind it is withdrawn by Reclaim and never written.
func TestReclaimWaitsForTheWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		dies bool // the broker's connection dies instead of reading on
	}{{"broker reads on", false}, {"connection dies", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fb := newStallingFakeBroker(t)
			res := &resolver{}
			res.set(1, fb.addr())
			p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
			send(t, p, 1, 0, 12, "head") // the in-order broker reads nothing more until it is answered
			head := recv(t, fb)

			orig := bytes.Repeat([]byte("kproxy records "), (16<<20)/15) // far above the socket buffers
			lent := bytes.Clone(orig)
			big, err := p.Send(context.Background(), 1, 0, Request{Key: keyProduce, Version: 8, Body: newLentProduce("big", lent)})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return stateOf(big.(*wireReq)) == stWriting }, "the big produce's write to start")
			queued, err := p.Send(context.Background(), 1, 0, Request{Key: keyProduce, Version: 8, Body: newLentProduce("queued", make([]byte, 100))})
			if err != nil {
				t.Fatal(err)
			}

			gone, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := big.Wait(gone); err == nil || errors.Is(err, retry.ErrNotSent) {
				t.Fatalf("abandoned while written: err %v, want an ambiguous error", err)
			}
			queued.(Lender).Reclaim() // withdraws: returns at once
			if s := stateOf(queued.(*wireReq)); s != stDone {
				t.Fatalf("queued request in state %d after Reclaim, want withdrawn", s)
			}

			reclaimed := make(chan struct{})
			go func() {
				big.(Lender).Reclaim()
				clear(lent) // the client's frame reused at once (orig has no zeros)
				close(reclaimed)
			}()
			select {
			case <-reclaimed:
				t.Fatal("Reclaim returned while the write was blocked")
			default:
			}
			if tc.dies {
				fb.kill(head.conn)
			} else {
				head.replyEmpty()
			}
			select {
			case <-reclaimed:
			case <-time.After(testWait):
				t.Fatalf("Reclaim did not return within %s of the write's end", testWait)
			}
			if tc.dies {
				return
			}
			got := recv(t, fb)
			req, ok := got.req.(*kmsg.ProduceRequest)
			if !ok || req.Topics[0].Topic != "big" {
				t.Fatalf("broker got %s after the head, want the big produce", kmsg.NameForKey(got.key))
			}
			if !bytes.Equal(req.Topics[0].Partitions[0].Records, orig) {
				t.Fatal("broker got records other than the original bytes")
			}
			got.replyEmpty()
			after := send(t, p, 1, 0, 12, "after")
			next := recv(t, fb)
			if next.key != 3 || topicOf(next) != "after" {
				t.Fatalf("broker got %s next, want the withdrawn produce never written", kmsg.NameForKey(next.key))
			}
			next.replyEmpty()
			if _, err := wait(t, after); err != nil {
				t.Fatal(err)
			}
		})
	}
}
