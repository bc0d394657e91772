package scale

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// TestQuickRun runs the harness end to end on a small cluster: every
// measurement runs, every target gets a status and the report is written
// (into a temporary folder, never the tree).
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, 3 brokers and 4 proxies")
	}
	root, err := testrig.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // the build included
	defer cancel()
	md := filepath.Join(t.TempDir(), "scale.md")
	rep, err := Run(ctx, Config{Repo: root, Sizes: []int{500}, SimBrokers: 20, SimPartitions: 500,
		LeaseTTL: 4 * time.Second, DeliveryTimeout: 30 * time.Second, ConvergenceSamples: 5, Quick: true,
		Markdown: md, Command: "go test", Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sizes[0]
	if s.Failed != 0 || s.ColdStart <= 0 {
		t.Errorf("cold start: %d failed, took %s", s.Failed, s.ColdStart)
	}
	if s.TakeoverParts == 0 || s.Takeover <= 0 {
		t.Errorf("takeover of %d partitions took %s", s.TakeoverParts, s.Takeover)
	}
	if s.MetadataParts < 500 || len(s.ProxyRSS) != 2 || s.EtcdDBBytes <= 0 || s.EtcdTxnPerSec <= 0 {
		t.Errorf("metadata listed %d partitions, %d proxies' RSS, etcd %.0f bytes, %.0f txn/s", s.MetadataParts, len(s.ProxyRSS), s.EtcdDBBytes, s.EtcdTxnPerSec)
	}
	if rep.Sim == nil || rep.Sim.MetadataParts != 500 || rep.Sim.ConvergeN != 5 {
		t.Errorf("simulation: %+v", rep.Sim)
	}
	if _, err := os.Stat(md); err != nil {
		t.Errorf("report not written: %v", err)
	}
}
