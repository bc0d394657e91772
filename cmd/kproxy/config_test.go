package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// TestServeSettingsPrecedence checks that a flag beats KPROXY_* beats the
// config file beats the default, for the settings of `kproxy serve`.
func TestServeSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kproxy.yaml")
	yaml := "listen: 127.0.0.1:7001\nadmin: 127.0.0.1:7002\ndrain-timeout: 3s\nupstream-conns: 9\nmax-connections-per-ip: 5\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KPROXY_ADMIN", "127.0.0.1:7102")
	t.Setenv("KPROXY_UPSTREAM_CONNS", "11")
	t.Setenv("KPROXY_CONNECTIONS_MAX_IDLE", "2m")

	got := map[string]string{}
	cmd := serveCommand()
	cmd.Action = func(c *cli.Context) error {
		for _, name := range []string{"listen", "admin", "drain-timeout", "upstream-conns", "etcd-endpoints", "max-connections-per-ip", "connections-max-idle", "queued-max-request-bytes"} {
			got[name] = fmt.Sprint(c.Value(name))
		}
		return nil
	}
	app := &cli.App{Name: "kproxy", Commands: []*cli.Command{cmd}}
	args := []string{"kproxy", "serve", "--config", file, "--upstream-conns", "13"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := app.RunContext(ctx, args); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := map[string]string{
		"listen":         "127.0.0.1:7001",        // file
		"admin":          "127.0.0.1:7102",        // env beats file
		"drain-timeout":  "3s",                    // file beats default
		"upstream-conns": "13",                    // flag beats env and file
		"etcd-endpoints": "http://127.0.0.1:2379", // default

		"max-connections-per-ip":   "5",         // file
		"connections-max-idle":     "2m0s",      // env
		"queued-max-request-bytes": "268435456", // default
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestConfigExampleKeysAreServeFlags: every key of config.example.yaml is a
// flag of `kproxy serve`, so the file documents nothing that does not exist.
func TestConfigExampleKeysAreServeFlags(t *testing.T) {
	b, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := yaml.Unmarshal(b, &keys); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	flags := map[string]bool{}
	for _, f := range serveCommand().Flags {
		for _, n := range f.Names() {
			flags[n] = true
		}
	}
	for k := range keys {
		if !flags[k] {
			t.Errorf("config.example.yaml key %q is not a flag of kproxy serve", k)
		}
	}
	for _, k := range []string{"queued-max-request-bytes", "max-connections-per-ip", "etcd-cacert", "admin-token-file", "upstream-tls-ca"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("config.example.yaml lacks %q", k)
		}
	}
}

// TestServeProduceValidationFlag: --produce-validation takes off, framing
// or full (the default), from the flag or the config file, and anything
// else stops serve before it starts.
func TestServeProduceValidationFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(file, []byte("produce-validation: framing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{{nil, "full"}, {[]string{"--produce-validation", "off"}, "off"}, {[]string{"--config", file}, "framing"}} {
		var got string
		cmd := serveCommand()
		cmd.Action = func(ctx *cli.Context) error { got = ctx.String("produce-validation"); return nil }
		app := &cli.App{Name: "kproxy", Commands: []*cli.Command{cmd}}
		if err := app.Run(append([]string{"kproxy", "serve"}, c.args...)); err != nil || got != c.want {
			t.Errorf("serve %v: produce-validation %q, err %v; want %q", c.args, got, err, c.want)
		}
	}
	app := &cli.App{Name: "kproxy", Commands: []*cli.Command{serveCommand()}}
	err := app.Run([]string{"kproxy", "serve", "--produce-validation", "crc"})
	if err == nil || !strings.Contains(err.Error(), "--produce-validation") {
		t.Fatalf("serve --produce-validation crc: %v, want an error naming the flag", err)
	}
}
