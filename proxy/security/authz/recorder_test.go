package authz

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRecorderCountsAndAudits(t *testing.T) {
	reg := prometheus.NewRegistry()
	var events []Event
	apis := []int16{int16(kmsg.Produce), int16(kmsg.Fetch)}
	r, err := NewRecorder(RecorderConfig{APIs: apis, Registerer: reg, Audit: func(e Event) { events = append(events, e) }, AuditAllowsEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Known label values are exported at zero before any decision.
	if n := testutil.CollectAndCount(reg, "kproxy_authz_decisions_total"); n != (len(apis)+1)*len(resourceTypes)*len(outcomes) {
		t.Fatalf("%d series exported at start", n)
	}
	a := New(Config{Mode: DenyByDefault})
	a.Update([]Binding{bind(topicT, literal, "t", "User:a", "*", opWrite, allow)})
	s := a.Session("User:a", "10.0.0.1", "PLAINTEXT")
	ctx := context.Background()
	for range 4 {
		d, _ := s.Authorize(opWrite, topicT, "t")
		r.Record(ctx, int16(kmsg.Produce), s, opWrite, topicT, "t", d)
	}
	d, _ := s.Authorize(opWrite, topicT, "secret")
	r.Record(ctx, int16(kmsg.Produce), s, opWrite, topicT, "secret", d)

	if got := testutil.ToFloat64(r.counts[int16(kmsg.Produce)][topicT][1]); got != 1 {
		t.Fatalf("denied count %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.counts[int16(kmsg.Produce)][topicT][0]); got != 4 {
		t.Fatalf("allowed count %v, want 4", got)
	}
	// Every denial and one in two allows are audited.
	if len(events) != 3 {
		t.Fatalf("%d audit events, want 3 (2 sampled allows, 1 denial): %+v", len(events), events)
	}
	last := events[2]
	if last.Decision != OutcomeDenied || last.Principal != "User:a" || last.Client != "10.0.0.1" || last.Listener != "PLAINTEXT" ||
		last.API != "Produce" || last.Resource != "secret" || last.Operation != "WRITE" || last.Reason != "no-match" {
		t.Fatalf("denial event %+v", last)
	}
	if events[0].Binding == "" {
		t.Fatal("an allow event names no binding")
	}
}
