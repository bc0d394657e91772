package testkit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/architecture.md is the map a newcomer reads first, so it must not
// drift from the tree: every path it names in backquotes exists, and every
// package under proxy/ (the part of the tree that changes most) is named.
// A path is a backquoted token with a slash (a package root may be written
// `proxy/`) or a .go suffix, and nothing a command or a flag would have
// (spaces, wildcards, a leading dash); file names are written in full from
// the repository root.
var docPath = regexp.MustCompile("`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*(?:\\.go|/)?)`")

func TestArchitectureMapMatchesTree(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("read the map: %v", err)
	}
	named := map[string]bool{}
	for _, m := range docPath.FindAllStringSubmatch(string(doc), -1) {
		p := strings.TrimSuffix(m[1], "/")
		if !strings.Contains(m[1], "/") && !strings.HasSuffix(p, ".go") {
			continue // a word, not a path
		}
		named[p] = true
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("docs/architecture.md names %q, which is not in the tree", p)
		}
	}
	if len(named) < 20 {
		t.Fatalf("docs/architecture.md names only %d paths: the map is missing", len(named))
	}
	for _, pkg := range proxyPackages(t, root) {
		if !named[pkg] {
			t.Errorf("package %s is not on the map in docs/architecture.md", pkg)
		}
	}
}

// proxyPackages lists every package under proxy/, module-relative.
func proxyPackages(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "./proxy/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./proxy/...: %v", err)
	}
	var pkgs []string
	for _, l := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(l, module))
	}
	return pkgs
}

func repoRoot(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}
