package compat

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Rec is one record as a client produced or consumed it. Partition and Offset
// are meaningful only for consumed records.
type Rec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// keySpread is how many distinct keys a run cycles through: enough to land on
// every partition of a 3-partition topic with any client's partitioner.
const keySpread = 16

// pad makes values compressible, so every codec really compresses, and keeps
// them free of the characters kcat uses as delimiters (':' and newline).
var pad = strings.Repeat("kproxy-compat-payload_", 6)

// makeRecords returns records tag.<seq>.pad for seq in [from, from+n). The
// sequence number in the value is how the checks recover production order.
func makeRecords(tag string, from, n int) []Rec {
	recs := make([]Rec, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, Rec{
			Key:   fmt.Sprintf("key-%02d", i%keySpread),
			Value: fmt.Sprintf("%s.%06d.%s", tag, i, pad),
		})
	}
	return recs
}

func seqOf(value string) (int, bool) {
	parts := strings.SplitN(value, ".", 3)
	if len(parts) != 3 {
		return 0, false
	}
	n, err := strconv.Atoi(parts[1])
	return n, err == nil
}

type partOff struct {
	p int32
	o int64
}

// dedupe drops redeliveries of the same stored record (same partition and
// offset), which consumer groups may legitimately produce around a rebalance.
func dedupe(got []Rec) []Rec {
	seen := make(map[partOff]bool, len(got))
	out := got[:0:0]
	for _, r := range got {
		k := partOff{r.Partition, r.Offset}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, r)
	}
	return out
}

// verifyOpts says how strict a check is.
type verifyOpts struct {
	// allowStoredDuplicates tolerates a value stored twice at different
	// offsets: a non-idempotent producer retrying across a failover may do
	// that and still be correct (at-least-once).
	allowStoredDuplicates bool
	// ordered checks that, within each partition, records are stored in the
	// order they were produced.
	ordered bool
}

// verify checks that got (already deduplicated by partition/offset) holds
// every record of want, nothing else, with the right keys, each key on one
// partition, and, when asked, in production order within each partition.
// It returns a note on tolerated anomalies and an error on real ones.
func verify(want, got []Rec, o verifyOpts) (string, error) {
	wantByValue := make(map[string]Rec, len(want))
	for _, r := range want {
		wantByValue[r.Value] = r
	}
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < 8 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	copies := make(map[string]int, len(got))
	keyPart := make(map[string]int32)
	for _, r := range got {
		w, ok := wantByValue[r.Value]
		if !ok {
			add("unexpected record p%d@%d %q", r.Partition, r.Offset, short(r.Value))
			continue
		}
		copies[r.Value]++
		if r.Key != w.Key {
			add("p%d@%d: key %q, want %q", r.Partition, r.Offset, r.Key, w.Key)
		}
		if p, ok := keyPart[r.Key]; ok && p != r.Partition {
			add("key %q on partitions %d and %d", r.Key, p, r.Partition)
		}
		keyPart[r.Key] = r.Partition
	}
	missing, dups := 0, 0
	firstMissing := ""
	for _, r := range want {
		switch n := copies[r.Value]; {
		case n == 0:
			if missing == 0 {
				firstMissing = short(r.Value)
			}
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 {
		add("%d of %d records missing (first %s)", missing, len(want), firstMissing)
	}
	note := ""
	if dups > 0 {
		if o.allowStoredDuplicates {
			note = fmt.Sprintf("%d records stored twice (producer retry)", dups)
		} else {
			add("%d records stored more than once", dups)
		}
	}
	if o.ordered {
		if err := verifyOrder(got); err != nil {
			add("%v", err)
		}
	}
	if len(problems) > 0 {
		return note, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return note, nil
}

// verifyOrder checks that sequence numbers grow with offsets in every
// partition.
func verifyOrder(got []Rec) error {
	byPart := make(map[int32][]Rec)
	for _, r := range got {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, rs := range byPart {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		last := -1
		for _, r := range rs {
			seq, ok := seqOf(r.Value)
			if !ok {
				return fmt.Errorf("p%d@%d: value %q has no sequence", p, r.Offset, short(r.Value))
			}
			if seq <= last {
				return fmt.Errorf("p%d@%d: seq %d stored after seq %d", p, r.Offset, seq, last)
			}
			last = seq
		}
	}
	return nil
}

// verifyArrivalOrder checks that a consumer delivered each partition's
// records in offset order.
func verifyArrivalOrder(got []Rec) error {
	last := make(map[int32]int64)
	for _, r := range got {
		if l, ok := last[r.Partition]; ok && r.Offset <= l {
			return fmt.Errorf("p%d: offset %d delivered after %d", r.Partition, r.Offset, l)
		}
		last[r.Partition] = r.Offset
	}
	return nil
}

func short(s string) string {
	if i := strings.LastIndexByte(s, '.'); i > 0 {
		return s[:i]
	}
	return s
}
