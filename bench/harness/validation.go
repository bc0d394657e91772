package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// The validation scenario measures what produce validation costs: the
// plain proxy runs at the default --produce-validation full (every batch
// framed, its header checked and its CRC-32C computed) and a second proxy
// with --produce-validation off forwards record data unchecked, on the
// same workload.
const (
	sideNoValidation = "kproxy-novalidation"
	// validationTopicPrefix starts the scenario's topics (roundTopic adds -rN).
	validationTopicPrefix = "validation-bench-"
	// validationCPUGoal is the most CPU per MB full validation may take, as
	// a multiple of none.
	validationCPUGoal = 1.10
	validationID      = "validation-produce-1k"
	badInputMetric    = "kproxy_bad_input_total"
)

var validationSides = []string{sideProxy, sideNoValidation}

// validationScenario runs produce-1k on the validating and the
// non-validating proxy.
func (h *Harness) validationScenario(ctx context.Context) error {
	if !h.selected(validationID) {
		return nil
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
		return fmt.Errorf("scenario %s: %w", validationID, err)
	}
	what := "as produce-1k, on kproxy (--produce-validation full, the default: each batch framed, its header checked and its CRC-32C computed before it is forwarded) and kproxy-novalidation (--produce-validation off)"
	if level != "full" {
		what = fmt.Sprintf("as produce-1k, on kproxy (--produce-validation %s, from -proxy-flags) and kproxy-novalidation (--produce-validation off)", level)
	}
	res, err := h.compareSides(ctx, validationID, fmt.Sprintf("Produce 1 KiB records, validation %s vs off", level), what,
		validationSides, h.freshPlan(validationTopicPrefix+"1k", h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8})))
	if err != nil {
		return err
	}
	after, err := testrig.ScrapeCounter(ctx, admin, badInputMetric)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", validationID, err)
	}
	if after != before {
		return fmt.Errorf("scenario %s: the validating proxy refused %.0f inputs of a valid workload (%s)", validationID, after-before, badInputMetric)
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
