package chaos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/integration/chaos/checker"
)

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds kproxy and etcdmember once per test binary.
func binaries(t *testing.T) Binaries {
	t.Helper()
	if testing.Short() {
		t.Skip("builds kproxy and etcdmember and runs them as processes")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kchaos-test-bin-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		built, buildErr = Build(ctx, "", binDir)
	})
	if buildErr != nil {
		t.Fatalf("build binaries: %v", buildErr)
	}
	return built
}

// resultsDir keeps results when KCHAOS_RESULTS names a folder, for looking
// at a failed run; otherwise they go with the test's temp dir.
func resultsDir(t *testing.T) string {
	if d := os.Getenv("KCHAOS_RESULTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// shortRun is the configuration both make-test runs share: a minute of
// faults, rotating every 6-10 s so every kind comes round.
func shortRun(t *testing.T, name string, disableFencing bool) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a cluster of processes for about 90s")
	}
	t.Parallel()
	bin := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	rep, err := Run(ctx, Options{
		Name: name, Results: resultsDir(t), Bin: bin, Duration: 60 * time.Second, Seed: 7,
		DisableFencing: disableFencing, IntervalMin: 6 * time.Second, IntervalMax: 10 * time.Second,
		Rate: 15,
	})
	if rep != nil {
		t.Logf("\n%s", rep.Summary())
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	total := 0
	for _, n := range rep.Faults {
		total += n
	}
	if total < 5 {
		t.Errorf("only %d faults injected in a minute: %v", total, rep.Faults)
	}
	if rep.Check.Stats.SendsOK < 500 {
		t.Errorf("only %d sends acknowledged: the workload barely ran", rep.Check.Stats.SendsOK)
	}
	return rep
}

// TestShortRun is the fault suite in miniature: with fencing on, a minute of
// faults must leave no anomaly, and the cluster must recover.
func TestShortRun(t *testing.T) {
	rep := shortRun(t, "short", false)
	if !rep.Valid {
		t.Errorf("anomalies with fencing on: %v (evidence in %s/report.json)", rep.Anomalies, rep.Dir)
	}
	if rep.AckedAfterHeal == 0 {
		t.Errorf("nothing acknowledged after the final heal: the cluster did not recover")
	}
}

// TestMutationProof runs the same suite with the brokers' fencing disabled:
// the checker must then see what fencing prevents.
func TestMutationProof(t *testing.T) {
	rep := shortRun(t, "mutation", true)
	if !rep.MutationDetected() {
		t.Errorf("fencing disabled, yet no inconsistent offsets or lost writes: the suite cannot see the bug (anomalies %v)", rep.Anomalies)
	}
}

func TestRenderDocs(t *testing.T) {
	main := &Report{Name: "chaos", Seed: 3, FaultDuration: "5m0s", LeaseTTL: "3s", Producers: 12, Partitions: 8,
		Valid: true, Faults: map[string]int{"kill-broker": 4, "pause-broker": 3}, FencedCommits: 17}
	main.Check.Stats.Sends = 1000
	mut := &Report{Name: "mutation", DisableFencing: true, Anomalies: map[checker.Kind]int{checker.LostWrite: 9}}
	mut.Check.Anomalies = []checker.Anomaly{{Kind: checker.LostWrite, Detail: "value x lost"}}
	var buf bytes.Buffer
	if err := RenderDocs(&buf, main, mut); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"kill-broker 4, pause-broker 3", "| fenced commits (broker metric) | 17 |",
		"lost-write 9", "value x lost", "| verdict | valid |", "12 kgo producers", "| verdict | detected"} {
		if !strings.Contains(out, want) {
			t.Errorf("docs lack %q", want)
		}
	}
	if strings.Contains(out, "<no value>") {
		t.Errorf("docs have unfilled fields:\n%s", out)
	}
	// Without reports the page still renders and says so.
	buf.Reset()
	if err := RenderDocs(&buf, nil, nil); err != nil || !strings.Contains(buf.String(), "No mutation run") {
		t.Fatalf("empty render: %v\n%s", err, buf.String())
	}
}

func TestLatestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, started time.Time, mutation bool) {
		r := &runner{dir: filepath.Join(dir, name), report: &Report{Name: name, Started: started, DisableFencing: mutation}}
		r.report.Check.Stats.Sends = 1
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := r.writeReport(); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write("a", t0, false)
	write("b", t0.Add(time.Hour), false)
	write("c", t0.Add(2*time.Hour), true)
	got, err := LatestReport(dir, false)
	if err != nil || got.Name != "b" {
		t.Fatalf("latest = %+v, %v", got, err)
	}
	got, err = LatestReport(dir, true)
	if err != nil || got.Name != "c" {
		t.Fatalf("latest mutation = %+v, %v", got, err)
	}
}
