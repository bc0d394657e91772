package adminui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/routing"
)

func TestSlowPageIsDroppedNotWaitedFor(t *testing.T) {
	h := newHub(4, 2)
	slow, _ := h.add()
	fast, _ := h.add()
	if _, ok := h.add(); ok {
		t.Fatal("a third page was accepted with max 2")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			h.broadcast([]byte("x"))
			<-fast.ch // the fast page keeps up
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("broadcast blocked on a page that reads nothing")
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow page was not dropped")
	}
	if h.count() != 1 || h.dropped != 1 {
		t.Fatalf("count %d dropped %d, want 1 and 1", h.count(), h.dropped)
	}
	h.close()
	if _, ok := h.add(); ok {
		t.Fatal("a page was accepted after close")
	}
	select {
	case <-fast.gone:
	default:
		t.Fatal("close left a page open")
	}
}

// sseReader reads server-sent events from a response body.
type sseReader struct{ sc *bufio.Scanner }

func (r sseReader) next() (name, data string, err error) {
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && name != "":
			return name, data, nil
		}
	}
	return "", "", r.sc.Err()
}

// TestEventsFollowTheTable: a page gets an overview at once, then each
// ownership change as a changes event, and rates from the registry.
func TestEventsFollowTheTable(t *testing.T) {
	tb := routing.NewTable()
	tb.SetBroker(routing.Broker{ID: 1, Addr: "127.0.0.1:1"})
	tb.SetBroker(routing.Broker{ID: 2, Addr: "127.0.0.1:2"})
	tb.SetTopic(routing.Topic{Name: "orders", Partitions: 2})
	tb.SetOwner("orders", 0, 1)
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests, Help: "h"}, []string{"api"})
	reg.MustRegister(reqs)
	reqs.WithLabelValues("Produce").Add(5)
	reqs.WithLabelValues("Fetch") // exported at zero: not listed
	u := New(Config{Table: tb, Gatherer: reg, Throttle: 10 * time.Millisecond, Tick: 50 * time.Millisecond,
		State: func() adminapi.Readiness { return adminapi.Readiness{Ready: true, Revision: 7} }})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { u.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	mux := http.NewServeMux()
	u.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Wait for Run's first look, so that the change below is a change.
	deadline := time.Now().Add(5 * time.Second)
	for u.current().version == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not read the table")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Get(srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := sseReader{bufio.NewScanner(resp.Body)}
	name, data, err := events.next()
	var ov Overview
	if err != nil || name != "overview" || json.Unmarshal([]byte(data), &ov) != nil || len(ov.Brokers) != 2 || ov.Partitions != 2 ||
		!ov.State.Ready || ov.State.Revision != 7 {
		t.Fatalf("first event %q %s (%v)", name, data, err)
	}
	tb.SetOwner("orders", 0, 2)
	sawChange, sawRates := false, false
	for !sawChange || !sawRates {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("within 10s: change %v, rates %v", sawChange, sawRates)
		}
		name, data, err := events.next()
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "changes":
			var cs []Change
			if err := json.Unmarshal([]byte(data), &cs); err != nil || len(cs) != 1 || cs[0].From != 1 || cs[0].To != 2 || cs[0].Topic != "orders" {
				t.Fatalf("changes event %s (%v)", data, err)
			}
			sawChange = true
		case "overview":
			var ov Overview
			if err := json.Unmarshal([]byte(data), &ov); err != nil {
				t.Fatal(err)
			}
			if ov.Rates.WindowSeconds > 0 {
				if len(ov.Rates.ByAPI) != 1 || ov.Rates.ByAPI[0].Name != "Produce" || ov.Rates.ByAPI[0].Total != 5 {
					t.Fatalf("rates %+v", ov.Rates)
				}
				sawRates = true
			}
		}
	}
	// Run's end closes the stream (the request's own context stays open).
	cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if name, _, err := events.next(); name == "" || err != nil {
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the event stream stayed open after Run ended")
	}
}
