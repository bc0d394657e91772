package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClassify covers every code the package names, for a request that
// changes state (Produce, OffsetCommit, JoinGroup, SyncGroup, CreateTopics
// in the proxy's table) and a repeatable one (Fetch, ListOffsets,
// OffsetForLeaderEpoch, Metadata, OffsetFetch, Heartbeat); which API is
// which is the table's, checked in proxy/apis (TestRepeatableRows).
func TestClassify(t *testing.T) {
	const (
		D = Done
		R = Definite // retry on a fresh route
		A = Ambiguous
		F = Final
	)
	cases := []struct {
		err  *kerr.Error // nil: no error
		want [2]Class    // not repeatable, repeatable
	}{
		{nil, [2]Class{D, D}},
		{kerr.NotLeaderForPartition, [2]Class{R, R}},
		{kerr.LeaderNotAvailable, [2]Class{R, R}},
		{kerr.NotCoordinator, [2]Class{R, R}},
		{kerr.CoordinatorNotAvailable, [2]Class{R, R}},
		{kerr.NotController, [2]Class{R, R}},
		{kerr.RequestTimedOut, [2]Class{A, R}},
		{kerr.NetworkException, [2]Class{A, R}},
		{kerr.KafkaStorageError, [2]Class{A, R}},
		{kerr.UnknownLeaderEpoch, [2]Class{F, F}},
		{kerr.FencedLeaderEpoch, [2]Class{F, F}},
		{kerr.UnknownTopicOrPartition, [2]Class{F, F}},
		{kerr.CoordinatorLoadInProgress, [2]Class{F, F}},
		{kerr.CorruptMessage, [2]Class{F, F}},
		{kerr.UnknownServerError, [2]Class{F, F}},
		{kerr.NotEnoughReplicas, [2]Class{F, F}},
	}
	for _, c := range cases {
		var code int16
		name := "NONE"
		if c.err != nil {
			code, name = c.err.Code, c.err.Message
		}
		for i, repeatable := range []bool{false, true} {
			if got := Classify(code, repeatable); got != c.want[i] {
				t.Errorf("Classify(%s, repeatable %v) = %v, want %v", name, repeatable, got, c.want[i])
			}
		}
	}
}

func TestClassifyErr(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Done},
		{"not sent", ErrNotSent, Definite},
		{"wrapped not sent", fmt.Errorf("dial broker 3: %w", ErrNotSent), Definite},
		{"joined not sent", errors.Join(io.ErrUnexpectedEOF, ErrNotSent), Definite},
		{"deadline", ctx.Err(), Ambiguous},
		{"canceled", context.Canceled, Ambiguous},
		{"connection broke after sending", fmt.Errorf("read response: %w", io.EOF), Ambiguous},
		{"anything else", errors.New("boom"), Ambiguous},
	}
	for _, c := range cases {
		if got := ClassifyErr(c.err); got != c.want {
			t.Errorf("ClassifyErr(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	if !IsContextErr(ctx.Err()) || !IsContextErr(fmt.Errorf("wait: %w", context.Canceled)) || IsContextErr(ErrNotSent) {
		t.Error("IsContextErr misclassifies")
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Done: "done", Definite: "definite", Ambiguous: "ambiguous", Final: "final", Class(42): "unknown"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", int(c), got, want)
		}
	}
}

func TestBackoffWithoutJitter(t *testing.T) {
	p := DefaultPolicy()
	ms := time.Millisecond
	want := []time.Duration{0, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 500 * ms, 500 * ms}
	for attempt, w := range want {
		if got := p.Backoff(attempt, nil); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", attempt, got, w)
		}
	}
	for _, attempt := range []int{-1, 1000, 1 << 30} {
		if got := p.Backoff(attempt, nil); got < 0 || got > p.Max {
			t.Errorf("Backoff(%d) = %v, outside [0, %v]", attempt, got, p.Max)
		}
	}
	flat := Policy{Initial: 5 * ms, Max: time.Second, Multiplier: 0.5}
	if got := flat.Backoff(6, nil); got != 5*ms {
		t.Errorf("multiplier below 1: Backoff(6) = %v, want 5ms", got)
	}
	noMax := Policy{Initial: 5 * ms, Multiplier: 2}
	if got := noMax.Backoff(4, nil); got != 40*ms {
		t.Errorf("no Max: Backoff(4) = %v, want 40ms", got)
	}
	if got := noMax.Backoff(500, nil); got <= 0 {
		t.Errorf("no Max: Backoff(500) = %v, overflowed", got)
	}
}

func TestBackoffJitter(t *testing.T) {
	p := DefaultPolicy()
	a, b := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 12; attempt++ {
		base := p.Backoff(attempt, nil)
		for range 50 {
			d := p.Backoff(attempt, a)
			if d2 := p.Backoff(attempt, b); d != d2 {
				t.Fatalf("same seed, different backoff: %v vs %v", d, d2)
			}
			lo, hi := time.Duration(float64(base)*(1-p.Jitter)), time.Duration(float64(base)*(1+p.Jitter))
			if d < lo || d > min(hi, p.Max) {
				t.Fatalf("Backoff(%d) = %v outside [%v, %v]", attempt, d, lo, min(hi, p.Max))
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Fatalf("jitter produced only %d distinct delays", len(seen))
	}
}

func TestNext(t *testing.T) {
	p := DefaultPolicy()
	now := time.Unix(100, 0)
	cases := []struct {
		name     string
		attempt  int
		deadline time.Time
		wantOK   bool
		wantWait time.Duration
	}{
		{"first retry, no deadline", 1, time.Time{}, true, 10 * time.Millisecond},
		{"within budget", 3, now.Add(time.Second), true, 40 * time.Millisecond},
		{"delay would pass the deadline", 3, now.Add(30 * time.Millisecond), false, 0},
		{"deadline passed", 1, now.Add(-time.Millisecond), false, 0},
		{"last allowed attempt", 99, time.Time{}, true, 500 * time.Millisecond},
		{"attempts exhausted", 100, time.Time{}, false, 0},
	}
	for _, c := range cases {
		d, ok := p.Next(c.attempt, now, c.deadline, nil)
		if ok != c.wantOK || d != c.wantWait {
			t.Errorf("%s: Next = (%v, %v), want (%v, %v)", c.name, d, ok, c.wantWait, c.wantOK)
		}
	}
	if _, ok := (Policy{Initial: time.Millisecond}).Next(1, now, time.Time{}, nil); ok {
		t.Error("MaxAttempts 0 allowed a retry")
	}
}

func TestBudget(t *testing.T) {
	now := time.Unix(100, 0)
	cases := []struct {
		timeout, floor, want time.Duration
	}{
		{30 * time.Second, time.Second, 30 * time.Second},  // produce timeout_ms
		{500 * time.Millisecond, time.Second, time.Second}, // short fetch max_wait: the floor
		{0, 2 * time.Second, 2 * time.Second},              // no timeout given
		{-time.Second, 0, 0},                               // nonsense in, no budget out
	}
	for _, c := range cases {
		if got := Budget(now, c.timeout, c.floor); !got.Equal(now.Add(c.want)) {
			t.Errorf("Budget(%v, %v) = now+%v, want now+%v", c.timeout, c.floor, got.Sub(now), c.want)
		}
	}
}

func TestWait(t *testing.T) {
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if err := Wait(context.Background(), 0); err != nil {
		t.Fatalf("Wait(0) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on canceled ctx = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Wait did not return promptly on a canceled context")
	}
	if err := Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait(0) on canceled ctx = %v", err)
	}
}

// TestRetriedCodes checks RetriedCodes against Classify over every code,
// repeatable or not: a code is listed exactly when some request retries it.
func TestRetriedCodes(t *testing.T) {
	listed := map[int16]bool{}
	for _, c := range RetriedCodes() {
		listed[c] = true
	}
	for code := int16(-1); code < 200; code++ {
		definite := false
		for _, repeatable := range []bool{false, true} {
			definite = definite || Classify(code, repeatable) == Definite
		}
		if definite != listed[code] {
			t.Errorf("code %d (%v): Classify says Definite for some request = %v, RetriedCodes lists it = %v",
				code, kerr.ErrorForCode(code), definite, listed[code])
		}
	}
}
