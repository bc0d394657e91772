// Package proxytest starts one assembly.Proxy for a test, against whatever
// brokers and etcd the test set up (kfake, a KafScale emulation), and stops
// and joins it when the test ends. It is devtest's sibling for tests that
// need the proxy alone rather than a whole devcluster. Only tests import
// it, so the product binary does not link the testing package.
package proxytest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/assembly"
)

// stopWait bounds how long the end of a test waits for the proxy to stop.
const stopWait = 15 * time.Second

// Start creates a proxy from cfg and runs it until the test ends; then it
// stops it and fails the test if Run returned an error or did not return
// within 15s. KPROXY_TEST_LOG=1 sends the proxy's debug log to stderr when
// cfg has no Logger.
func Start(t testing.TB, cfg assembly.Config) *assembly.Proxy {
	t.Helper()
	if cfg.Logger == nil && os.Getenv("KPROXY_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := assembly.New(ctx, cfg)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }() // owner: the cleanup below
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("proxy Run: %v", err)
			}
		case <-time.After(stopWait):
			t.Errorf("proxy did not stop within %v", stopWait)
		}
	})
	return srv
}
