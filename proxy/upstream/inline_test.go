package upstream

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInlineWriteBySend: on a connection one affinity owns (a broker that
// answers in order), a small request with nothing queued before it is
// written by its own Send, so it is on the wire when Send returns; one
// above inlineMaxBytes, and every request queued behind it, go through the
// writer goroutine, and the broker gets them all in the order Send was
// called.
func TestInlineWriteBySend(t *testing.T) {
	fb, p := inOrderPool(t, Config{ConnsPerBroker: 1})
	echoNext := func() { recvKey(t, fb, keyProduce).replyEmpty() }
	first := sendReq(t, p, 7, produce()) // learns the shape
	echoNext()
	mustWait(t, first, "first produce")
	// Its answer may come before its writer's write returned: until then
	// the connection's next request queues behind that write.
	c := first.(*wireReq).c
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return !c.writing }, "the writer's write to return")

	const n = 50
	for i := range n {
		pend := sendReq(t, p, 7, produce())
		if s := stateOf(pend.(*wireReq)); s != stWritten && s != stDone {
			t.Fatalf("produce %d in state %d when Send returned, want written by Send", i, s)
		}
		echoNext()
		mustWait(t, pend, "inline produce")
	}

	// The broker holds the first answer, so the rest wait in its socket.
	topics := []string{"a", "b", "big", "c", "d"}
	pends := make([]Pending, len(topics))
	for i, topic := range topics {
		records := make([]byte, 100)
		if topic == "big" {
			records = bytes.Repeat([]byte("r"), 2*inlineMaxBytes)
		}
		body := newLentProduce(topic, records)
		pend, err := p.Send(context.Background(), 1, 7, Request{Key: keyProduce, Version: 8, Body: body})
		if err != nil {
			t.Fatalf("send %s: %v", topic, err)
		}
		pends[i] = pend
		if s := stateOf(pend.(*wireReq)); i < 2 && s != stWritten {
			t.Fatalf("produce %s in state %d when Send returned, want written by Send", topic, s)
		}
	}
	for i, want := range topics {
		got := recvKey(t, fb, keyProduce)
		if topic := got.req.(*kmsg.ProduceRequest).Topics[0].Topic; topic != want {
			t.Fatalf("broker got produce %s as number %d, want %s", topic, i, want)
		}
		got.replyEmpty()
		mustWait(t, pends[i], want)
	}
}

// TestInlineWritesConcurrent: Sends of one affinity from several goroutines
// hand the inline write on to each other and to the writer goroutine (run
// under -race: the writer's scratch is its own until afterWrite), and every
// request is answered.
func TestInlineWritesConcurrent(t *testing.T) {
	fb, p := inOrderPool(t, Config{ConnsPerBroker: 1})
	const senders, each = 4, 50
	go func() {
		for range senders * each {
			select {
			case r := <-fb.reqs:
				r.replyEmpty()
			case <-fb.quit:
				return
			}
		}
	}()
	errs := make(chan error, senders)
	for range senders {
		go func() {
			for range each {
				pend, err := p.Send(context.Background(), 1, 7, Request{Key: keyProduce, Version: 8, Body: newLentProduce("t", make([]byte, 100))})
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), testWait)
					_, err = pend.Wait(ctx)
					cancel()
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// inOrderPool is a pool of cfg with broker 1 an in-order fake broker.
func inOrderPool(t *testing.T, cfg Config) (*fakeBroker, *Pool) {
	t.Helper()
	fb := newInOrderFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, cfg, res)
	return fb, p
}
