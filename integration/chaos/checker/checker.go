// Package checker finds the anomalies a Kafka-compatible log must not show in
// a fault test's history, in the manner of Jepsen's Kafka queue checker.
//
// The promise: Check never calls a history clean when it contains an
// acknowledged write that the final read lacks, two values at one offset, a
// definitely failed write that became visible, a duplicate the producer mode
// does not allow, an acknowledged offset the log contradicts, a per-producer
// or real-time order inversion within a partition, a high watermark that one
// observer saw go down, or a final read that did not complete or that two
// proxies disagree on. Each anomaly carries the operations that prove it.
//
// What it assumes of the history (package history): record values are unique
// per send, each send names its partition at invocation, polls and final
// reads only return records below the high watermark (committed records), and
// a final read covers its partition from the log start to the high watermark.
package checker

import (
	"fmt"
	"sort"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// Kind names an anomaly.
type Kind string

const (
	// InconsistentOffsets: two different values at one partition offset,
	// from any mix of acknowledgements, polls and final reads.
	InconsistentOffsets Kind = "inconsistent-offsets"
	// LostWrite: an acknowledged value, or one a consumer saw, is missing
	// from the completed final read of its partition.
	LostWrite Kind = "lost-write"
	// WrongOffset: the final read holds an acknowledged value, but not at the
	// partition and offset its acknowledgement named.
	WrongOffset Kind = "wrong-offset"
	// G1a: a value whose send definitely failed is visible (aborted read).
	G1a Kind = "G1a"
	// Duplicate: a value at more than one offset. Never allowed for
	// idempotent producers; allowed for others only if the send was info.
	Duplicate Kind = "duplicate"
	// ProducerOrder: one producer's acknowledged sends to one partition sit
	// at offsets out of the order it sent them.
	ProducerOrder Kind = "producer-order"
	// RealtimeOrder: A was acknowledged before B was invoked, same
	// partition, yet A's offset is higher than B's.
	RealtimeOrder Kind = "realtime-order"
	// HWMDecrease: one observer saw a partition's high watermark go down.
	HWMDecrease Kind = "hwm-decrease"
	// Phantom: a read returned a value no send ever produced.
	Phantom Kind = "phantom"
	// IncompleteFinalRead: the final read of a partition through a proxy
	// failed or stopped below the high watermark, so losses there cannot be
	// ruled out.
	IncompleteFinalRead Kind = "incomplete-final-read"
	// FinalReadDivergence: two proxies' completed final reads of a partition
	// differ in high watermark or in which offsets hold records.
	FinalReadDivergence Kind = "final-read-divergence"
)

// Kinds lists every anomaly kind in report order.
var Kinds = []Kind{
	InconsistentOffsets, LostWrite, WrongOffset, G1a, Duplicate,
	ProducerOrder, RealtimeOrder, HWMDecrease, Phantom,
	IncompleteFinalRead, FinalReadDivergence,
}

// Anomaly is one violation with its evidence.
type Anomaly struct {
	Kind      Kind     `json:"kind"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"` // -1 when not about one offset
	Values    []string `json:"values,omitempty"`
	Detail    string   `json:"detail"`
	// Ops are history indices of the operations that prove the anomaly.
	Ops []int64 `json:"ops,omitempty"`
}

// Stats counts what the history contains.
type Stats struct {
	Sends            int `json:"sends"`
	SendsOK          int `json:"sends_ok"`
	SendsFail        int `json:"sends_fail"`
	SendsInfo        int `json:"sends_info"` // includes sends with no outcome
	AckedNoOffset    int `json:"acked_no_offset"`
	SendsIdempotent  int `json:"sends_idempotent"`
	InfoVisible      int `json:"info_visible"` // info sends found in reads
	Polls            int `json:"polls"`
	PolledRecords    int `json:"polled_records"`
	FinalReads       int `json:"final_reads"`
	FinalRecords     int `json:"final_records"`
	DistinctValues   int `json:"distinct_values_read"`
	AllowedDuplicate int `json:"allowed_duplicates"` // plain-mode info duplicates
	Faults           int `json:"faults"`
}

// Result is the checker's verdict.
type Result struct {
	Valid     bool             `json:"valid"`
	Stats     Stats            `json:"stats"`
	Faults    map[string]int   `json:"faults_by_kind"`
	Counts    map[Kind]int     `json:"anomalies_by_kind"`
	Anomalies []Anomaly        `json:"anomalies"` // at most Options.MaxPerKind of each kind
	Orphans   []history.Op     `json:"orphans,omitempty"`
	Partition map[int32]PStats `json:"partitions"`
}

// PStats summarises one partition.
type PStats struct {
	AckedSends int   `json:"acked_sends"`
	FinalHWM   int64 `json:"final_hwm"` // highest final-read high watermark; -1 if none
}

// Options tune the report size; the verdict does not depend on them.
type Options struct {
	// MaxPerKind bounds the anomalies kept per kind (counts stay exact);
	// 0 means 50.
	MaxPerKind int
}

// Check analyses a history.
func Check(ops []history.Op, opt Options) Result {
	if opt.MaxPerKind <= 0 {
		opt.MaxPerKind = 50
	}
	a := newAnalysis(ops)
	out := &collector{max: opt.MaxPerKind, counts: map[Kind]int{}}
	a.checkFinalReads(out)
	a.checkInconsistentOffsets(out)
	a.checkSends(out)
	a.checkDuplicates(out)
	a.checkPhantoms(out)
	a.checkProducerOrder(out)
	a.checkRealtimeOrder(out)
	a.checkHWM(out)
	res := Result{
		Valid:     out.total == 0,
		Stats:     a.stats,
		Faults:    a.faults,
		Counts:    out.counts,
		Anomalies: out.list,
		Orphans:   a.orphans,
		Partition: a.partitionStats(),
	}
	return res
}

type collector struct {
	max    int
	total  int
	counts map[Kind]int
	list   []Anomaly
}

func (c *collector) add(an Anomaly) {
	c.total++
	c.counts[an.Kind]++
	if c.counts[an.Kind] <= c.max {
		c.list = append(c.list, an)
	}
}

func (r Result) String() string {
	s := fmt.Sprintf("valid=%t sends=%d ok=%d fail=%d info=%d polls=%d final-records=%d",
		r.Valid, r.Stats.Sends, r.Stats.SendsOK, r.Stats.SendsFail, r.Stats.SendsInfo,
		r.Stats.Polls, r.Stats.FinalRecords)
	for _, k := range Kinds {
		if n := r.Counts[k]; n > 0 {
			s += fmt.Sprintf(" %s=%d", k, n)
		}
	}
	return s
}

// sortedPartitions returns the keys of m in order.
func sortedPartitions[V any](m map[int32]V) []int32 {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}
