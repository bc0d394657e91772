package crypt

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestDecompressBudget: the decompressed records of the rewrites in flight
// draw on one budget. With most of it held elsewhere, a compressed batch is
// neither encrypted nor decrypted but answered REQUEST_TIMED_OUT (counted
// as busy); with it free, both work and give back all they held.
func TestDecompressBudget(t *testing.T) {
	const maxBatch, budget = 4 << 20, 8 << 20
	s := newService(t, newMemKMS(), nil, "max_batch_bytes: 4194304\ndecompress_budget_bytes: 8388608\n")
	for codec, name := range codecNames {
		if codec == codecNone {
			continue // nothing to decompress
		}
		t.Run(name, func(t *testing.T) {
			in := buildBatch(t, s.codecs, codec, sampleRecords()...)
			busy := func(op string) float64 {
				return testutil.ToFloat64(s.m.failures.WithLabelValues(op, "secret-a", "busy"))
			}

			held := int64(budget - maxBatch/4)
			if !s.codecs.budget.TryAcquire(held) {
				t.Fatal("the budget is held by an earlier rewrite")
			}
			before := busy("produce")
			if _, code := encrypt(s, "secret-a", in); code != kerr.RequestTimedOut.Code {
				t.Fatalf("encrypt with the budget used up: code %d, want REQUEST_TIMED_OUT", code)
			}
			if got := busy("produce"); got != before+1 {
				t.Fatalf("busy produce failures %v, want %v", got, before+1)
			}
			s.codecs.budget.Release(held)
			enc, code := encrypt(s, "secret-a", in)
			if code != 0 {
				t.Fatalf("encrypt with the budget free: code %d", code)
			}

			if !s.codecs.budget.TryAcquire(held) {
				t.Fatal("encrypt kept part of the budget")
			}
			before = busy("fetch")
			if _, code := s.Decrypt(context.Background(), "secret-a", 0, enc); code != kerr.RequestTimedOut.Code {
				t.Fatalf("decrypt with the budget used up: code %d, want REQUEST_TIMED_OUT", code)
			}
			if got := busy("fetch"); got != before+1 {
				t.Fatalf("busy fetch failures %v, want %v", got, before+1)
			}
			s.codecs.budget.Release(held)
			if _, code := s.Decrypt(context.Background(), "secret-a", 0, enc); code != 0 {
				t.Fatalf("decrypt with the budget free: code %d", code)
			}
			if !s.codecs.budget.TryAcquire(budget) {
				t.Fatal("decrypt kept part of the budget")
			}
			s.codecs.budget.Release(budget)
		})
	}
}

// TestDecompressBudgetBelowMaxBatch: a budget that could not hold the
// largest batch is refused when the file is read.
func TestDecompressBudgetBelowMaxBatch(t *testing.T) {
	_, err := ParseFile([]byte(minimalFile + "max_batch_bytes: 4194304\ndecompress_budget_bytes: 1048576\n"))
	if err == nil || !strings.Contains(err.Error(), "decompress_budget_bytes") {
		t.Fatalf("ParseFile: err = %v, want decompress_budget_bytes refused", err)
	}
}
