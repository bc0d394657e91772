package chaos

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/template"

	"github.com/kproxy/kproxy/integration/chaos/checker"
)

//go:embed correctness.md.tmpl
var docsTemplate string

type docsData struct {
	Main, Mutation *Report
	Producers      int
	Partitions     int32
}

// WriteDocs renders docs/correctness.md from the template and the newest
// figures: rep, mut (either may be nil), and for what is missing the newest
// report of that kind under resultsDir.
func WriteDocs(path, resultsDir string, rep, mut *Report) error {
	var main *Report
	switch {
	case rep != nil && rep.DisableFencing:
		mut = rep
	case rep != nil:
		main = rep
	}
	if main == nil {
		main, _ = LatestReport(resultsDir, false)
	}
	if mut == nil {
		mut, _ = LatestReport(resultsDir, true)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer f.Close()
	return RenderDocs(f, main, mut)
}

// RenderDocs executes the correctness page template.
func RenderDocs(w io.Writer, main, mut *Report) error {
	t, err := template.New("correctness").Funcs(template.FuncMap{
		"counts":   countsLine,
		"detected": func(r *Report) bool { return r.MutationDetected() },
		"evidence": func(r *Report) []checker.Anomaly { return keyEvidence(r.Check.Anomalies, 3) },
		"anomalies": func(m map[checker.Kind]int) string {
			s := map[string]int{}
			for k, v := range m {
				s[string(k)] = v
			}
			return countsLine(s)
		},
	}).Parse(docsTemplate)
	if err != nil {
		return fmt.Errorf("parse docs template: %w", err)
	}
	d := docsData{Main: main, Mutation: mut, Producers: 12, Partitions: 8}
	if main != nil && main.Producers > 0 {
		d.Producers, d.Partitions = main.Producers, main.Partitions
	}
	if err := t.Execute(w, d); err != nil {
		return fmt.Errorf("render docs: %w", err)
	}
	return nil
}

// LatestReport finds the newest report.json under resultsDir whose run had
// fencing disabled (mutation) or not.
func LatestReport(resultsDir string, mutation bool) (*Report, error) {
	paths, err := filepath.Glob(filepath.Join(resultsDir, "*", "report.json"))
	if err != nil {
		return nil, err
	}
	var best *Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r Report
		if json.Unmarshal(b, &r) != nil || r.DisableFencing != mutation || r.Check.Stats.Sends == 0 {
			continue
		}
		if best == nil || r.Started.After(best.Started) {
			best = &r
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no report under %s", resultsDir)
	}
	return best, nil
}

// keyEvidence picks up to n anomalies, the kinds fencing prevents first.
func keyEvidence(all []checker.Anomaly, n int) []checker.Anomaly {
	var out []checker.Anomaly
	for _, k := range checker.Kinds { // report order: the worst kinds first
		for _, a := range all {
			if a.Kind == k && len(out) < n {
				out = append(out, a)
			}
		}
	}
	return out
}
