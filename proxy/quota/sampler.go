package quota

import (
	"sync"
	"time"
)

// sampler is Kafka's windowed rate (a SampledStat of Rate): Samples
// windows of Window each; the rate is what they hold divided by the time
// they cover, which counts at least Samples-1 full windows so that a new
// client is not judged on its first instant.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	cur     int
	last    time.Time // last record, for eviction
}

type sample struct {
	start time.Time
	value float64
}

func newSampler(n int, now time.Time) *sampler {
	s := &sampler{samples: make([]sample, n), last: now}
	for i := range s.samples {
		s.samples[i].start = now
	}
	return s
}

// record adds v at now and returns the rate including it (per second).
func (s *sampler) record(v float64, now time.Time, window time.Duration) (rate float64, span time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = now
	s.purge(now, window)
	c := &s.samples[s.cur]
	if now.Sub(c.start) >= window {
		s.cur = (s.cur + 1) % len(s.samples)
		c = &s.samples[s.cur]
		*c = sample{start: now}
	}
	c.value += v
	return s.rate(now, window)
}

// purge resets samples older than the whole window, as Kafka does.
func (s *sampler) purge(now time.Time, window time.Duration) {
	expire := window * time.Duration(len(s.samples))
	for i := range s.samples {
		if now.Sub(s.samples[i].start) >= expire {
			s.samples[i] = sample{start: now}
		}
	}
}

func (s *sampler) rate(now time.Time, window time.Duration) (float64, time.Duration) {
	total := 0.0
	oldest := now
	for _, x := range s.samples {
		total += x.value
		if x.start.Before(oldest) {
			oldest = x.start
		}
	}
	span := now.Sub(oldest)
	if minSpan := window * time.Duration(len(s.samples)-1); span < minSpan {
		span = minSpan
	}
	if span <= 0 {
		span = window
	}
	return total / span.Seconds(), span
}

// idle reports whether nothing was recorded since before.
func (s *sampler) idle(before time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Before(before)
}

// throttleTime is Kafka's: how long the client must be quiet for its rate
// over span to come down to limit, (observed - limit) / limit * span,
// bounded by max.
func throttleTime(rate, limit float64, span, max time.Duration) time.Duration {
	if rate <= limit {
		return 0
	}
	if limit <= 0 {
		return max
	}
	d := time.Duration((rate - limit) / limit * float64(span))
	return min(d, max)
}
