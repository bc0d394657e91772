// Package devtest starts devcluster's in-process cluster for a test and
// closes it when the test ends. Only tests import it (like etcdlocal's
// etcdtest), so the product binary does not link the testing package.
package devtest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kproxy/kproxy/assembly/devcluster"
)

// Start starts an in-process cluster (devcluster, the one `kproxy dev`
// runs) for a test and closes it when the test ends. KPROXY_TEST_LOG=1 sends
// the cluster's debug log to stderr.
func Start(t testing.TB, cfg devcluster.Config) *devcluster.Cluster {
	t.Helper()
	if cfg.Logger == nil && os.Getenv("KPROXY_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
