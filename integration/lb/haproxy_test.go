// Package lb tests kproxy replicas behind a real TCP load balancer
// (HAProxy) that sends the PROXY protocol: the clients' own addresses reach
// ACL host matching, per-IP budgets, zones and the audit log.
package lb

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// haproxyPath is HAProxy's binary: the test skips without it, except in CI
// (scripts/install-clients.sh installs it there).
func haproxyPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("haproxy not installed (CI=true): run scripts/install-clients.sh")
		}
		t.Skip("haproxy not installed: apt-get install haproxy, or make clients")
	}
	return p
}

// startHAProxy runs HAProxy in TCP mode on front, balancing round robin
// over backends, each server line with send (send-proxy or send-proxy-v2).
func startHAProxy(t *testing.T, front, send string, backends []string) {
	t.Helper()
	path := haproxyPath(t)
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server kproxy%d %s %s\n", i, b, send)
	}
	cfg := fmt.Sprintf(`global
  maxconn 512
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend kafka
  bind %s
  default_backend kproxy
backend kproxy
  balance roundrobin
%s`, front, servers.String())
	dir := t.TempDir()
	file := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testrig.NewProc(testrig.Spec{Name: "haproxy", Path: path, Args: []string{"-db", "-f", file}, LogPath: filepath.Join(dir, "haproxy.log")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(2 * time.Second) })
	for {
		nc, err := net.DialTimeout("tcp", front, time.Second)
		if err == nil {
			nc.Close()
			return
		}
		select {
		case <-p.Done():
			t.Fatalf("haproxy exited: %v\n%s", p.Err(), p.Tail())
		case <-ctx.Done():
			t.Fatalf("haproxy not listening on %s: %v\n%s", front, err, p.Tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dialerFrom dials from local address ip (127.0.0.x).
func dialerFrom(ip string) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return d.DialContext
}
