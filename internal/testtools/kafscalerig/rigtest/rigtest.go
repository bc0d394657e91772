// Package rigtest gives tests the KafScale rig (kafscalerig) and kproxy in
// KafScale mode in front of it, both ended with the test. Require decides
// whether a test can run: without KAFSCALE_SRC it skips with a message,
// except under CI=true, where it fails, as does a failed build. Only tests
// import it.
package rigtest

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/assembly/devcluster/proxytest"
	"github.com/kproxy/kproxy/internal/testtools/kafscalerig"
	"github.com/kproxy/kproxy/internal/testtools/testrig"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/assembly"
)

// buildWait bounds KafScale's build (1-2 minutes on a cold module cache).
const buildWait = 10 * time.Minute

// Require returns KafScale's built programs, building them on the first
// call into bin/kafscale/ of the module (ignored by git). It skips the
// test when KAFSCALE_SRC is unset, unless CI=true; then, and when the
// build or moto_server is missing, the test fails. KAFSCALE_SRC=off skips
// on purpose, also in CI (.ci/run sets it on a clone without the archive).
func Require(t testing.TB) kafscalerig.Bins {
	t.Helper()
	inCI := os.Getenv("CI") == "true"
	src := os.Getenv(kafscalerig.SrcEnv)
	if src == "off" {
		t.Skipf("real KafScale skipped: %s=off (no KafScale source archive beside this clone)", kafscalerig.SrcEnv)
	}
	if src == "" {
		if inCI {
			t.Fatalf("CI=true but %s is unset: the real-KafScale checks cannot run (.ci/run sets it to ../shared/kafscale)", kafscalerig.SrcEnv)
		}
		t.Skipf("real KafScale skipped: %s is unset (set it to the folder with KafScale's build.sh and source archive; `make kafscale`)", kafscalerig.SrcEnv)
	}
	if _, err := exec.LookPath("moto_server"); err != nil {
		t.Fatalf("%s is set but moto_server (KafScale's local S3) is not installed: %v", kafscalerig.SrcEnv, err)
	}
	root, err := testrig.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildWait)
	defer cancel()
	bins, err := kafscalerig.Build(ctx, src, filepath.Join(root, "bin", "kafscale"))
	if err != nil {
		t.Fatalf("build real KafScale: %v", err)
	}
	return bins
}

// Start runs the rig of cfg (Bins from Require when unset, Dir a temp
// dir) until the test ends.
func Start(t testing.TB, cfg kafscalerig.Config) *kafscalerig.Rig {
	t.Helper()
	if cfg.Bins.Broker == "" {
		cfg.Bins = Require(t)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*kafscalerig.StartWait)
	defer cancel()
	r, err := kafscalerig.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start real KafScale: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, b := range r.Brokers {
				t.Logf("%s log (end):\n%s", b.Proc.Name(), r.LogTail(b.Proc.Name(), 30))
			}
		}
		if err := r.Close(); err != nil {
			t.Errorf("stop real KafScale: %v", err)
		}
	})
	return r
}

// Kproxy is kproxy in KafScale mode, in-process, in front of r's brokers.
type Kproxy struct {
	*assembly.Proxy
	Registry *prometheus.Registry
}

// StartKproxy runs kproxy (`serve --etcd-layout kafscale`, in-process)
// on r's etcd until the test ends; edit, if set, changes its config.
func StartKproxy(t testing.TB, r *kafscalerig.Rig, logger *slog.Logger, edit func(*assembly.Config)) *Kproxy {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := assembly.Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: r.Etcd,
		Layout: layout.New(kafscalerig.Prefix), EtcdLayout: assembly.LayoutKafScale,
		ClusterID: "kproxy-over-kafscale", Registry: reg, Logger: logger,
		Server: proxy.Config{DrainTimeout: 2 * time.Second},
	}
	if edit != nil {
		edit(&cfg)
	}
	return &Kproxy{Proxy: proxytest.Start(t, cfg), Registry: reg}
}
