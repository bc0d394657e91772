package upstream

import (
	"testing"
	"time"
)

// TestInOrderDeadlineAfterAnswers: on a connection to a broker that answers
// in order, a request written once everything before it was answered has
// ReadTimeout from its own write: the deadlines of answered requests do
// not push its deadline back (they did, ReadTimeout per request, so that a
// busy connection's hang went unseen for minutes).
func TestInOrderDeadlineAfterAnswers(t *testing.T) {
	const rt = 100 * time.Millisecond
	fb, p, _ := inOrderPool(t, Config{ConnsPerBroker: 1, ReadTimeout: rt})
	for i := range 30 {
		pend := send(t, p, 1, 7, 12, "answered")
		recv(t, fb).replyEmpty()
		if _, err := wait(t, pend); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	start := time.Now()
	held := send(t, p, 1, 7, 12, "held")
	recv(t, fb) // never answered
	if _, err := wait(t, held); err == nil {
		t.Fatal("held request answered")
	}
	// 30 answered requests pushed it back by 3s; its own is 100ms.
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("hung broker seen after %v, ReadTimeout %v", took, rt)
	}
}
