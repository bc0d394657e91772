package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs the suite runs as processes.
type Binaries struct {
	Kproxy     string
	EtcdMember string
}

// Build compiles cmd/kproxy and the etcdmember command into dir. moduleRoot
// is the repository root ("" means: find go.mod upwards from the working
// directory).
func Build(ctx context.Context, moduleRoot, dir string) (Binaries, error) {
	if moduleRoot == "" {
		var err error
		if moduleRoot, err = findModuleRoot(); err != nil {
			return Binaries{}, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("make bin dir: %w", err)
	}
	b := Binaries{Kproxy: filepath.Join(dir, "kproxy"), EtcdMember: filepath.Join(dir, "etcdmember")}
	for _, t := range []struct{ out, pkg string }{
		{b.Kproxy, "./cmd/kproxy"},
		{b.EtcdMember, "./integration/chaos/cmd/etcdmember"},
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", t.out, t.pkg)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", t.pkg, err, strings.TrimSpace(string(out)))
		}
	}
	return b, nil
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
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
	return "", fmt.Errorf("no go.mod above the working directory")
}
