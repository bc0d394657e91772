package testrig

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeTimeout bounds one scrape when the caller's context has no sooner
// deadline, so a stopped process cannot hang a test or a bench.
const scrapeTimeout = 5 * time.Second

// maxScrape bounds the body read from one /metrics endpoint.
const maxScrape = 16 << 20

// Scrape reads the Prometheus text endpoint http://addr/metrics and returns
// the value of every series whose metric family name starts with prefix,
// keyed by series: the name alone, or the name and its labels sorted by
// name (`m{kind="group",reason="fenced"}`). Histograms and summaries give
// their _sum and _count series and one series per bucket or quantile, as
// the text format writes them. Parsing is prometheus/common's expfmt, the
// parser Prometheus itself uses, so label values with spaces, braces or
// escapes and timestamps are read right.
func Scrape(ctx context.Context, addr, prefix string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %s", addr, resp.Status)
	}
	m, err := ParseMetrics(io.LimitReader(resp.Body, maxScrape), prefix)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return m, nil
}

// ScrapeCounter sums every series of the metric name on an admin endpoint's
// /metrics.
func ScrapeCounter(ctx context.Context, admin, name string) (float64, error) {
	return ScrapeCounterWhere(ctx, admin, name)
}

// ScrapeCounterWhere is ScrapeCounter over the series whose labels include
// each of labels, written as Scrape keys them: `zone_local="true"`.
func ScrapeCounterWhere(ctx context.Context, admin, name string, labels ...string) (float64, error) {
	m, err := Scrape(ctx, admin, name)
	if err != nil {
		return 0, err
	}
	var sum float64
	for series, v := range m {
		if MetricName(series) == name && hasLabels(series, labels) {
			sum += v
		}
	}
	return sum, nil
}

// hasLabels says whether a series key's label set holds every label.
func hasLabels(series string, labels []string) bool {
	set := ""
	if i, j := strings.IndexByte(series, '{'), strings.LastIndexByte(series, '}'); i >= 0 && j > i {
		set = "," + series[i+1:j] + ","
	}
	for _, l := range labels {
		if !strings.Contains(set, ","+l+",") {
			return false
		}
	}
	return true
}

// MetricName is the metric name of a series key Scrape returned.
func MetricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// ParseMetrics reads Prometheus text format from r and returns the series
// of the families whose name starts with prefix, keyed as Scrape does.
func ParseMetrics(r io.Reader, prefix string) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			addSeries(out, name, m)
		}
	}
	return out, nil
}

// addSeries writes the series of one metric of family name into out.
func addSeries(out map[string]float64, name string, m *dto.Metric) {
	labels := m.GetLabel()
	switch {
	case m.Counter != nil:
		out[seriesKey(name, labels)] += m.Counter.GetValue()
	case m.Gauge != nil:
		out[seriesKey(name, labels)] += m.Gauge.GetValue()
	case m.Untyped != nil:
		out[seriesKey(name, labels)] += m.Untyped.GetValue()
	case m.Histogram != nil:
		h := m.Histogram
		out[seriesKey(name+"_sum", labels)] += h.GetSampleSum()
		out[seriesKey(name+"_count", labels)] += float64(h.GetSampleCount())
		for _, b := range h.GetBucket() {
			le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
			out[seriesKey(name+"_bucket", labels, "le", le)] += float64(b.GetCumulativeCount())
		}
	case m.Summary != nil:
		s := m.Summary
		out[seriesKey(name+"_sum", labels)] += s.GetSampleSum()
		out[seriesKey(name+"_count", labels)] += float64(s.GetSampleCount())
		for _, q := range s.GetQuantile() {
			qs := strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)
			out[seriesKey(name, labels, "quantile", qs)] += q.GetValue()
		}
	}
}

// seriesKey is name{labels} with the labels (and the extra name/value pairs)
// sorted by name and values quoted as the text format quotes them.
func seriesKey(name string, labels []*dto.LabelPair, extra ...string) string {
	pairs := make([][2]string, 0, len(labels)+len(extra)/2)
	for _, l := range labels {
		pairs = append(pairs, [2]string{l.GetName(), l.GetValue()})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		pairs = append(pairs, [2]string{extra[i], extra[i+1]})
	}
	if len(pairs) == 0 {
		return name
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var sb strings.Builder
	sb.WriteString(name)
	sb.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(p[0])
		sb.WriteByte('=')
		sb.WriteString(strconv.Quote(p[1]))
	}
	sb.WriteByte('}')
	return sb.String()
}
