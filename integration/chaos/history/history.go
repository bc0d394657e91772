// Package history records what a fault test's clients did and saw, as a
// Jepsen-style list of operations, and reads such a list back.
//
// The promise: every operation a client starts is recorded as an invocation
// before it starts, and its outcome (ok, fail or info) is recorded after it
// ends, each with a time from one monotonic clock, so that a checker can
// reason about real-time order. Fail means the operation definitely did not
// take effect; info means its outcome is unknown. An invocation that never
// gets an outcome (the run ended first) must be read as info.
//
// Operations are kept in memory and, when a writer is given, streamed to it as
// JSON lines in the order they were recorded, so a crashed run still leaves a
// history on disk.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Type is the kind of an operation record: an invocation or an outcome.
type Type string

const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail" // definitely did not take effect
	Info   Type = "info" // outcome unknown
)

// F names what an operation does.
type F string

const (
	// Send produces one record whose value is unique in the run.
	Send F = "send"
	// Poll is one consumer fetch: the records and high watermarks it saw.
	Poll F = "poll"
	// FinalRead reads one partition from its start to its high watermark
	// through one proxy, after every fault was healed.
	FinalRead F = "final-read"
	// Fault is a nemesis action: invoke when it starts, ok when healed.
	Fault F = "fault"
)

// Record is one record a read saw.
type Record struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
}

// Watermark is a partition's high watermark as a read saw it.
type Watermark struct {
	Partition int32 `json:"p"`
	HWM       int64 `json:"hwm"`
}

// Op is one operation record. Only the fields its F and Type use are set.
type Op struct {
	Index   int64  `json:"index"`
	Time    int64  `json:"time"` // nanoseconds since the history began
	Process string `json:"process"`
	Type    Type   `json:"type"`
	F       F      `json:"f"`
	// Invoke is, on an outcome, the Index of its invocation.
	Invoke int64 `json:"invoke,omitempty"`

	// Send: the value and partition (set at invocation), the acknowledged
	// offset (set on ok), and whether the producer is idempotent.
	Value      string `json:"value,omitempty"`
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	Idempotent bool   `json:"idempotent,omitempty"`
	// Seq orders one producer's sends in the order it issued them.
	Seq int64 `json:"seq,omitempty"`

	// Via is the proxy address the client used.
	Via   string `json:"via,omitempty"`
	Error string `json:"error,omitempty"`

	// Poll and FinalRead: what was seen.
	Records    []Record    `json:"records,omitempty"`
	Watermarks []Watermark `json:"hwm,omitempty"`

	// Fault: its kind (e.g. "kill-broker") and target (e.g. "broker-2").
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
}

// Recorder appends operations to a history. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	now   func() time.Time
	start time.Time
	ops   []Op
	w     *bufio.Writer
	enc   *json.Encoder
	err   error
}

// NewRecorder starts a history now. If w is not nil every operation is also
// written to it as one JSON line; call Flush before reading w. now is the
// clock (nil means time.Now); its readings must carry a monotonic reading for
// the times to be safe against wall clock steps.
func NewRecorder(w io.Writer, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	r := &Recorder{now: now, start: now()}
	if w != nil {
		r.w = bufio.NewWriter(w)
		r.enc = json.NewEncoder(r.w)
	}
	return r
}

// Invoke records the start of op and returns it with its index and time set.
func (r *Recorder) Invoke(op Op) Op {
	op.Type = Invoke
	op.Invoke = 0
	return r.add(op)
}

// Complete records the outcome of inv. out carries the outcome's type (OK,
// Fail or Info) and whatever it learned (offset, records, error); process,
// function and the send's value, partition, mode and sequence are copied
// from inv where out leaves them empty.
func (r *Recorder) Complete(inv Op, out Op) Op {
	if out.Type == Invoke || out.Type == "" {
		out.Type = Info
	}
	out.Invoke = inv.Index
	out.Process, out.F = inv.Process, inv.F
	if out.Value == "" {
		out.Value = inv.Value
	}
	if out.Type != OK || out.F != Send {
		out.Partition = inv.Partition
	}
	out.Idempotent = inv.Idempotent
	out.Seq = inv.Seq
	if out.Via == "" {
		out.Via = inv.Via
	}
	if out.Fault == "" {
		out.Fault, out.Target = inv.Fault, inv.Target
	}
	return r.add(out)
}

func (r *Recorder) add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = int64(len(r.ops))
	op.Time = int64(r.now().Sub(r.start))
	r.ops = append(r.ops, op)
	if r.enc != nil && r.err == nil {
		if err := r.enc.Encode(op); err != nil {
			r.err = fmt.Errorf("write history op %d: %w", op.Index, err)
		}
	}
	return op
}

// Elapsed is the time since the history began, on the recorder's clock.
func (r *Recorder) Elapsed() time.Duration { return r.now().Sub(r.start) }

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Len is the number of operations recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ops)
}

// Flush writes buffered lines to the writer and returns the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		if err := r.w.Flush(); err != nil {
			r.err = fmt.Errorf("flush history: %w", err)
		}
	}
	return r.err
}

// Read parses a history written by a Recorder (one JSON object per line).
func Read(rd io.Reader) ([]Op, error) {
	dec := json.NewDecoder(rd)
	var ops []Op
	for {
		var op Op
		err := dec.Decode(&op)
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return ops, fmt.Errorf("read history op %d: %w", len(ops), err)
		}
		ops = append(ops, op)
	}
}

// Pair is an invocation and its outcome, if it got one.
type Pair struct {
	Invoke   Op
	Complete *Op // nil: no outcome recorded, which means info
}

// Outcome is the pair's outcome type; a missing outcome is Info.
func (p Pair) Outcome() Type {
	if p.Complete == nil {
		return Info
	}
	return p.Complete.Type
}

// Pairs matches every invocation with its outcome, in invocation order.
// Outcomes whose invocation is missing are returned in orphans.
func Pairs(ops []Op) (pairs []Pair, orphans []Op) {
	byIndex := make(map[int64]int, len(ops)/2)
	for _, op := range ops {
		if op.Type == Invoke {
			byIndex[op.Index] = len(pairs)
			pairs = append(pairs, Pair{Invoke: op})
		}
	}
	for i := range ops {
		op := ops[i]
		if op.Type == Invoke {
			continue
		}
		j, ok := byIndex[op.Invoke]
		if !ok || pairs[j].Complete != nil {
			orphans = append(orphans, op)
			continue
		}
		pairs[j].Complete = &ops[i]
	}
	return pairs, orphans
}
