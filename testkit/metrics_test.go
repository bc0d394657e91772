package testkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// newMetric is a metric built by client_golang's own constructors, which
// registers nothing: outside internal/promreg a metric is built with
// promreg's (promreg.Counter(reg, ...) and so on), which register it, so a
// metric cannot be left out of /metrics by a forgotten Register call.
var newMetric = regexp.MustCompile(`prometheus\.New(Counter|Gauge|Histogram|Summary|Untyped)(Vec|Func)?\(`)

// unregisteredMetrics lists "file: call" for each such construction under
// root outside internal/promreg.
func unregisteredMetrics(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	eachSource(t, root, func(rel string, src []byte) error {
		if strings.HasPrefix(rel, "internal/promreg/") {
			return nil
		}
		for _, m := range newMetric.FindAll(src, -1) {
			out = append(out, rel+": "+string(m))
		}
		return nil
	})
	return out
}

func TestMetricsBuiltThroughPromreg(t *testing.T) {
	for _, m := range unregisteredMetrics(t, repoRoot(t)) {
		t.Errorf("%s: build it with promreg's constructor of that kind (promreg.Counter(reg, opts), ...), which registers it", m)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.go":      "package p\nvar c = prometheus.NewCounterVec(opts, nil)\n",
		"a_test.go": "package p\nvar c = prometheus.NewGauge(opts)\n",
		"b.go":      "package p\nvar c = promreg.Gauge(reg, opts)\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := unregisteredMetrics(t, dir); len(got) != 1 || got[0] != "a.go: prometheus.NewCounterVec(" {
		t.Fatalf("unregisteredMetrics = %q, want a.go's NewCounterVec only", got)
	}
}
