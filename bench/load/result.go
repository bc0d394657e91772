// Package load generates Kafka load with franz-go (kgo) and measures it:
// producers and consumers with a given record size, partition set, client
// count, acks and rate, reporting records/s, MB/s and latency percentiles
// from an HDR histogram (bounded relative error, never averages of
// averages). cmd/kbench is its command line; bench/harness runs it against
// brokers directly, through kproxy and through a plain TCP relay.
//
// Every run has a warm-up (connections, metadata, partition ownership) that
// is not measured, then a measured window. Throughput counts what completed
// inside the window; latency counts records sent inside the window.
package load

import (
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1 µs to 2 min at 3 significant digits (0.1% error).
const (
	histMinMicros = 1
	histMaxMicros = int64(2 * time.Minute / time.Microsecond)
	histSigFigs   = 3
)

// NewHistogram returns an empty latency histogram in microseconds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// Result is what one run measured. It is written as JSON by cmd/kbench.
type Result struct {
	Kind          string  `json:"kind"` // produce, consume, e2e, conns
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"` // record values only (payload)
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes of payload per second
	// Latency is over what the run measures: produce = send to ack (from
	// the intended send time when rate limited), consume = fetch request
	// round trip, e2e = send to receipt by a consumer.
	Latency    Latency `json:"latency_us"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	// Hist is the latency histogram, HDR V2 compressed and base64 encoded,
	// so that runs can be merged without losing precision.
	Hist string `json:"hist,omitempty"`
	// Conns is the number of connections held (conns runs).
	Conns int `json:"conns,omitempty"`
}

// Latency is a summary of a histogram, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   int64   `json:"p50"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p999"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
}

// Summarize reads the percentiles of h.
func Summarize(h *hdrhistogram.Histogram) Latency {
	return Latency{
		Count: h.TotalCount(),
		P50:   h.ValueAtQuantile(50),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		Max:   h.Max(),
		Mean:  h.Mean(),
	}
}

// EncodeHistogram packs h for Result.Hist.
func EncodeHistogram(h *hdrhistogram.Histogram) (string, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodeHistogram unpacks Result.Hist.
func DecodeHistogram(s string) (*hdrhistogram.Histogram, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode histogram base64: %w", err)
	}
	h, err := hdrhistogram.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}

// finish fills the derived fields of r from the counters and histogram.
func (r *Result) finish(h *hdrhistogram.Histogram, window time.Duration) error {
	r.Seconds = window.Seconds()
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / 1e6 / r.Seconds
	}
	r.Latency = Summarize(h)
	enc, err := EncodeHistogram(h)
	if err != nil {
		return err
	}
	r.Hist = enc
	return nil
}

// recorder is a histogram safe for concurrent use plus error counting.
type recorder struct {
	mu       sync.Mutex
	h        *hdrhistogram.Histogram
	errors   int64
	firstErr string
}

func newRecorder() *recorder { return &recorder{h: NewHistogram()} }

// record adds one latency; values beyond the histogram's range are clamped
// so that an outlier is counted rather than dropped.
func (r *recorder) record(d time.Duration) {
	us := max(d.Microseconds(), histMinMicros)
	us = min(us, histMaxMicros)
	r.mu.Lock()
	_ = r.h.RecordValue(us) // in range by construction
	r.mu.Unlock()
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// into copies the errors into res and returns the histogram.
func (r *recorder) into(res *Result) *hdrhistogram.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Errors, res.FirstError = r.errors, r.firstErr
	return r.h
}
