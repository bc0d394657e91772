package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestServeEncryptionConfigChecked: a missing or bad --encryption-config
// stops serve before it starts, with an error naming the flag.
func TestServeEncryptionConfigChecked(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("kms: {type: aws, region: us-east-1}\ntopic:\n  - {match: a, key: k}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "missing.yaml"), typo} {
		app := &cli.App{Name: "kproxy", Commands: []*cli.Command{serveCommand()}}
		err := app.Run([]string{"kproxy", "serve", "--encryption-config", file})
		if err == nil || !strings.Contains(err.Error(), "--encryption-config") {
			t.Fatalf("serve --encryption-config %s: %v, want an error naming the flag", filepath.Base(file), err)
		}
	}
}
