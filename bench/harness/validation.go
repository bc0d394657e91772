package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// The validation scenarios measure what produce validation costs: the
// plain proxy runs at the default --produce-validation full (every batch
// framed, its header checked, its CRC-32C derived from prefix sums taken
// as the request frame was read, its records walked, decompressed first
// when compressed) and a second proxy with
// --produce-validation off forwards record data unchecked, on the same
// workload: uncompressed (validation-produce-1k, the one with a target)
// and once per codec (validation-produce-1k-<codec>).
const (
	sideNoValidation = "kproxy-novalidation"
	// validationTopicPrefix starts the scenario's topics (roundTopic adds -rN).
	validationTopicPrefix = "validation-bench-"
	// validationCPUGoal is the most CPU per MB full validation may take, as
	// a multiple of none.
	validationCPUGoal = 1.10
	validationID      = "validation-produce-1k"
	// validationMinRounds: validation's share of the proxy's CPU (about
	// 10%, in profiles of produce-1k) is what the target allows, and one
	// side's CPU per MB differs by up to 12% between runs of eight rounds
	// (0.82 and 0.73 ms/MB), whose full/off ratios still differed by 0.04
	// (1.13 and 1.09), so the scenario with the target runs at least eight.
	validationMinRounds = 8
	badInputMetric      = "kproxy_bad_input_total"
)

var validationSides = []string{sideProxy, sideNoValidation}

// validationCodecs are the codecs of the per-codec scenarios ("" is none:
// validationID itself).
var validationCodecs = []string{"", "gzip", "snappy", "lz4", "zstd"}

// validationScenarioID is the scenario of codec ("": validationID).
func validationScenarioID(codec string) string {
	if codec == "" {
		return validationID
	}
	return validationID + "-" + codec
}

// validationScenario runs produce-1k on the validating and the
// non-validating proxy, once per selected codec.
func (h *Harness) validationScenario(ctx context.Context) error {
	for _, codec := range validationCodecs {
		if !h.selected(validationScenarioID(codec)) {
			continue
		}
		if err := h.validationRun(ctx, codec); err != nil {
			return err
		}
	}
	return nil
}

// validationRun is one validation scenario: produce-1k in batches of codec.
func (h *Harness) validationRun(ctx context.Context, codec string) error {
	id := validationScenarioID(codec)
	title, compressed := "Produce 1 KiB records", ""
	if codec != "" {
		title, compressed = "Produce 1 KiB records in "+codec+" batches", ", in "+codec+" batches (decompressed to be checked)"
	}
	level := validationFlag(h.cfg.ProxyFlags) // -proxy-flags may set another level to compare with off
	if level == "" {
		level = "full"
	}
	// After ClusterConfig.ProxyArgs on its command line: the last value wins.
	if err := h.cluster.startAltProxy(ctx, "--produce-validation", "off"); err != nil {
		return fmt.Errorf("start the proxy without validation: %w", err)
	}
	defer h.cluster.stopAltProxy()
	admin := h.cluster.proxy.AdminAddr
	before, err := testrig.ScrapeCounter(ctx, admin, badInputMetric)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", id, err)
	}
	what := "as produce-1k" + compressed + ", on kproxy (--produce-validation full, the default: each batch framed, its header checked, its CRC-32C checked (from prefix sums taken as the frame was read) and its records walked before it is forwarded) and kproxy-novalidation (--produce-validation off)"
	if level != "full" {
		what = fmt.Sprintf("as produce-1k%s, on kproxy (--produce-validation %s, from -proxy-flags) and kproxy-novalidation (--produce-validation off)", compressed, level)
	}
	plan := h.freshPlan(validationTopicPrefix+"1k"+codec, h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8, codec: codec}))
	if codec == "" {
		plan.minRounds = validationMinRounds
	}
	res, err := h.compareSides(ctx, id, fmt.Sprintf("%s, validation %s vs off", title, level), what, validationSides, plan)
	if err != nil {
		return err
	}
	after, err := testrig.ScrapeCounter(ctx, admin, badInputMetric)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", id, err)
	}
	if after != before {
		return fmt.Errorf("scenario %s: the validating proxy refused %.0f inputs of a valid workload (%s)", id, after-before, badInputMetric)
	}
	p, _ := res.side(sideProxy)
	n, _ := res.side(sideNoValidation)
	res.Ratios = []Ratio{
		{level + " / off CPU per MB", div(p.IntermediaryCPUMsPerMB, n.IntermediaryCPUMsPerMB), "x"},
		{level + " / off throughput", div(p.RecordsPerSec, n.RecordsPerSec), "x"},
		{level + " - off p99", float64(p.Latency.P99-n.Latency.P99) / 1000, "ms"},
	}
	h.report.Scenarios = append(h.report.Scenarios, res)
	return nil
}

// validationFlag is the value -proxy-flags gives --produce-validation ("" if none).
func validationFlag(flags []string) string {
	for i, f := range flags {
		if v, ok := strings.CutPrefix(f, "--produce-validation="); ok {
			return v
		}
		if f == "--produce-validation" && i+1 < len(flags) {
			return flags[i+1]
		}
	}
	return ""
}

// evaluateValidation checks full validation's CPU per MB against none.
func (r *Report) evaluateValidation() {
	// The level is full unless -proxy-flags set another (the scenario's title says which).
	r.Targets = append(r.Targets, r.cpuRatioTarget(validationID, "proxy CPU per MB with produce validation, "+validationID,
		fmt.Sprintf("<= %.2f x off", validationCPUGoal), validationCPUGoal, sideProxy, sideNoValidation))
}
