package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// UnsafeTag is the build tag that compiles kproxy's test-only switches in
// (`kproxy broker --unsafe-disable-fencing`). Only the fault suite uses it.
const UnsafeTag = "kproxy_unsafe"

// Package paths of the programs the rigs run.
const (
	KproxyPkg     = "./cmd/kproxy"
	KbenchPkg     = "./cmd/kbench"
	EtcdMemberPkg = "./integration/chaos/cmd/etcdmember"
)

// Target is one program to build.
type Target struct {
	Pkg  string   // package path relative to the module root, e.g. KproxyPkg
	Out  string   // output file
	Tags []string // build tags
}

// Build compiles each target with `go build` in the module at root ("" means
// the module above the working directory).
func Build(ctx context.Context, root string, targets ...Target) error {
	if root == "" {
		var err error
		if root, err = ModuleRoot(); err != nil {
			return err
		}
	}
	for _, t := range targets {
		if err := os.MkdirAll(filepath.Dir(t.Out), 0o755); err != nil {
			return fmt.Errorf("go build %s: %w", t.Pkg, err)
		}
		args := []string{"build", "-o", t.Out}
		if len(t.Tags) > 0 {
			args = append(args, "-tags", strings.Join(t.Tags, ","))
		}
		cmd := exec.CommandContext(ctx, "go", append(args, t.Pkg)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " ")+" "+t.Pkg, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ModuleRoot is the folder of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	for range 64 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("module root: no go.mod above the working directory")
}
