package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestEtcdPrefixFollowsLayout: --etcd-prefix defaults to KafScale's root
// with --etcd-layout kafscale, unless set by flag, environment or file.
func TestEtcdPrefixFollowsLayout(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kproxy.yaml")
	if err := os.WriteFile(file, []byte("etcd-layout: kafscale\netcd-prefix: /from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	layoutOnly := filepath.Join(dir, "layout.yaml")
	if err := os.WriteFile(layoutOnly, []byte("etcd-layout: kafscale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"native default", nil, nil, "/kproxy"},
		{"kafscale default", []string{"--etcd-layout", "kafscale"}, nil, "/kafscale"},
		{"kafscale by env", nil, map[string]string{"KPROXY_ETCD_LAYOUT": "kafscale"}, "/kafscale"},
		{"kafscale by file", []string{"--config", layoutOnly}, nil, "/kafscale"},
		{"kafscale, prefix flag", []string{"--etcd-layout", "kafscale", "--etcd-prefix", "/ks"}, nil, "/ks"},
		{"kafscale, prefix env", []string{"--etcd-layout", "kafscale"}, map[string]string{"KPROXY_ETCD_PREFIX": "/env"}, "/env"},
		{"kafscale, prefix file", []string{"--config", file}, nil, "/from-file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var got string
			cmd := serveCommand()
			cmd.Action = func(ctx *cli.Context) error { got = etcdPrefix(ctx); return nil }
			app := &cli.App{Name: "kproxy", Commands: []*cli.Command{cmd}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := app.RunContext(ctx, append([]string{"kproxy", "serve"}, c.args...)); err != nil {
				t.Fatalf("run: %v", err)
			}
			if got != c.want {
				t.Errorf("etcd prefix = %q, want %q", got, c.want)
			}
		})
	}
}
