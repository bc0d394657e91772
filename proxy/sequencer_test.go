package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func resp(id int) response { return response{body: []byte(fmt.Sprint(id))} }

func ids(rs []response) string {
	s := ""
	for _, r := range rs {
		if s != "" {
			s += ","
		}
		s += string(r.body)
	}
	return s
}

// TestSequencerOrder feeds completions in a given order and checks what the
// writer can take after each.
func TestSequencerOrder(t *testing.T) {
	type step struct {
		complete int  // ticket to complete
		skip     bool // complete it with no response
		want     string
	}
	cases := []struct {
		name    string
		tickets int
		steps   []step
	}{
		{"in order", 3, []step{{0, false, "0"}, {1, false, "1"}, {2, false, "2"}}},
		{"reverse", 3, []step{{2, false, ""}, {1, false, ""}, {0, false, "0,1,2"}}},
		{"middle first", 3, []step{{1, false, ""}, {0, false, "0,1"}, {2, false, "2"}}},
		{"skip at head", 3, []step{{0, true, ""}, {2, false, ""}, {1, false, "1,2"}}},
		{"skip in middle", 3, []step{{1, true, ""}, {0, false, "0"}, {2, false, "2"}}},
		{"all skipped", 2, []step{{1, true, ""}, {0, true, ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSequencer(4, 0, nil)
			ctx := context.Background()
			for i := range tc.tickets {
				if tk, err := s.reserve(ctx); err != nil || tk != uint64(i) {
					t.Fatalf("reserve = %d, %v", tk, err)
				}
			}
			for _, st := range tc.steps {
				r := resp(st.complete)
				r.skip = st.skip
				got := completeTake(t, s, uint64(st.complete), r)
				if ids(got) != st.want {
					t.Fatalf("after completing %d: took %q, want %q", st.complete, ids(got), st.want)
				}
				if len(got) > 0 {
					s.written()
				}
			}
			s.closeInput(0, false)
			if _, err := s.take(ctx, nil); !errors.Is(err, io.EOF) {
				t.Fatalf("take after draining: %v, want EOF", err)
			}
		})
	}
}

// completeTake completes ticket tk and returns what became writable: what
// complete handed its caller as the writer, else what take returns now.
func completeTake(t *testing.T, s *sequencer, tk uint64, r response) []response {
	t.Helper()
	if got := s.complete(tk, r); got != nil {
		return got
	}
	return takeNow(t, s)
}

// takeNow takes what is ready without blocking for more.
func takeNow(t *testing.T, s *sequencer) []response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := s.take(ctx, nil)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("take: %v", err)
	}
	return got
}

func TestSequencerCapacity(t *testing.T) {
	s := newSequencer(2, 0, nil)
	ctx := context.Background()
	s.reserve(ctx)
	s.reserve(ctx)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.reserve(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third reserve with capacity 2: %v, want to block until the deadline", err)
	}
	got := completeTake(t, s, 0, resp(0))
	if ids(got) != "0" {
		t.Fatalf("took %q", ids(got))
	}
	// Taken but not yet written still counts against capacity.
	short2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if _, err := s.reserve(short2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reserve before written: %v, want to block", err)
	}
	s.written()
	if tk, err := s.reserve(ctx); err != nil || tk != 2 {
		t.Fatalf("reserve after written = %d, %v", tk, err)
	}
}

func TestSequencerSkipFreesCapacity(t *testing.T) {
	s := newSequencer(1, 0, nil)
	ctx := context.Background()
	for i := range 5 { // acks=0 requests only: the writer never writes
		tk, err := s.reserve(ctx)
		if err != nil || tk != uint64(i) {
			t.Fatalf("reserve %d = %d, %v", i, tk, err)
		}
		if got := completeTake(t, s, tk, response{skip: true}); len(got) != 0 {
			t.Fatalf("took %q for a skipped ticket", ids(got))
		}
	}
}

func TestSequencerClose(t *testing.T) {
	s := newSequencer(1, 0, nil)
	ctx := context.Background()
	s.reserve(ctx)
	errc := make(chan error, 2)
	go func() { _, err := s.reserve(ctx); errc <- err }()
	go func() { _, err := s.take(ctx, nil); errc <- err }()
	s.close()
	for range 2 {
		select {
		case err := <-errc:
			if !errors.Is(err, errSequencerClosed) {
				t.Fatalf("after close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("close did not wake a waiter")
		}
	}
	s.complete(0, resp(0)) // no effect, no panic
}

func TestSequencerCloseInputReturnsUnusedTicket(t *testing.T) {
	s := newSequencer(4, 0, nil)
	ctx := context.Background()
	s.reserve(ctx)
	unused, _ := s.reserve(ctx)
	s.closeInput(unused, true)
	if _, err := s.reserve(ctx); !errors.Is(err, errSequencerClosed) {
		t.Fatalf("reserve after closeInput: %v", err)
	}
	if got := completeTake(t, s, 0, resp(0)); ids(got) != "0" {
		t.Fatalf("took %q", ids(got))
	}
	s.written()
	if _, err := s.take(ctx, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("take after the last ticket: %v, want EOF (the unused ticket must not wait)", err)
	}
}

// TestSequencerCompleterWrites: the request that completes the idle head
// of the line becomes the writer; while it writes, neither another
// completion nor take gets a batch, and written hands what completed
// meanwhile, and then the end of input, to take.
func TestSequencerCompleterWrites(t *testing.T) {
	s := newSequencer(4, 0, nil)
	ctx := context.Background()
	s.reserve(ctx)
	s.reserve(ctx)
	if got := s.complete(0, resp(0)); ids(got) != "0" {
		t.Fatalf("complete of the idle head handed over %q, want 0", ids(got))
	}
	if got := s.complete(1, resp(1)); got != nil {
		t.Fatalf("complete while a batch is being written handed over %q", ids(got))
	}
	if got := takeNow(t, s); len(got) != 0 {
		t.Fatalf("take while a batch is being written took %q", ids(got))
	}
	s.written()
	got, err := s.take(ctx, nil)
	if err != nil || ids(got) != "1" {
		t.Fatalf("take after written = %q, %v; want 1", ids(got), err)
	}
	s.closeInput(0, false)
	if _, err := takeEOF(s); !errors.Is(err, errWriting) {
		t.Fatalf("take while the last batch is being written: %v, want to wait", err)
	}
	s.written()
	if _, err := s.take(ctx, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("take after the last batch was written: %v, want EOF", err)
	}
}

// errWriting: takeEOF found neither a batch nor the end.
var errWriting = errors.New("take would wait")

// takeEOF is take that does not wait.
func takeEOF(s *sequencer) ([]response, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := s.take(ctx, nil)
	if errors.Is(err, context.Canceled) {
		return got, errWriting
	}
	return got, err
}

// TestSequencerConcurrent completes tickets from many goroutines in random
// order while one writer takes; the writer must see every response exactly
// once, in ticket order, and never more than capacity outstanding.
func TestSequencerConcurrent(t *testing.T) {
	const capacity, total, workers = 8, 5000, 8
	s := newSequencer(capacity, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	work := make(chan uint64, capacity)
	// Every batch, whoever holds the writer's role for it (a worker whose
	// complete handed it over, or the writer goroutine's take), goes to
	// the checker, which calls written once it has checked it.
	batches := make(chan []response)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var held []uint64
			flush := func() {
				rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
				for _, tk := range held {
					r := resp(int(tk))
					r.skip = tk%7 == 3
					if b := s.complete(tk, r); b != nil { // this worker is the writer now
						batches <- b
					}
				}
				held = held[:0]
			}
			for tk := range work {
				held = append(held, tk)
				if rng.IntN(3) == 0 || len(work) == 0 { // never sit on tickets the reader waits for
					flush()
				}
			}
			flush()
		})
	}
	go func() { // reader: reserve in order
		defer close(work)
		for range total {
			tk, err := s.reserve(ctx)
			if err != nil {
				return
			}
			s.mu.Lock()
			n := s.next - s.free
			s.mu.Unlock()
			if n > capacity {
				t.Errorf("%d tickets outstanding, capacity %d", n, capacity)
			}
			work <- tk
		}
	}()

	wg.Go(func() { // the writer goroutine
		var batch []response
		for {
			var err error
			if batch, err = s.take(ctx, batch[:0]); err != nil {
				return
			}
			select {
			case batches <- batch:
			case <-ctx.Done():
				return
			}
		}
	})

	want := 0
	for want < total {
		var batch []response
		select {
		case batch = <-batches:
		case <-ctx.Done():
			t.Fatalf("no batch after response %d: %v", want, ctx.Err())
		}
		for _, r := range batch {
			for want%7 == 3 { // skipped tickets never reach the writer
				want++
			}
			if string(r.body) != fmt.Sprint(want) {
				t.Fatalf("got response %s, want %d", r.body, want)
			}
			want++
		}
		for want < total && want%7 == 3 {
			want++
		}
		s.written()
	}
	cancel()
	wg.Wait()
}
