package lease_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a Markdown text, in order.
func goBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(md) {
		t := strings.TrimRight(line, "\n")
		switch {
		case !in && t == "```go":
			in, cur = true, nil
		case in && t == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, t)
		}
	}
	return blocks
}

// codeLines are the trimmed non-empty lines of a block.
func codeLines(block string) []string {
	var out []string
	for line := range strings.Lines(block) {
		if t := strings.TrimSpace(line); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// missingFragmentLines returns the lines of the fragments that the whole
// file does not hold.
func missingFragmentLines(whole string, fragments []string) []string {
	have := map[string]bool{}
	for _, l := range codeLines(whole) {
		have[l] = true
	}
	var missing []string
	for _, f := range fragments {
		for _, l := range codeLines(f) {
			if !have[l] {
				missing = append(missing, l)
			}
		}
	}
	return missing
}

// splitDoc separates the one block that is a whole Go file (it has a
// package clause) from the fragments.
func splitDoc(t *testing.T, md string) (whole string, fragments []string) {
	t.Helper()
	for _, b := range goBlocks(md) {
		if strings.Contains("\n"+b, "\npackage ") {
			if whole != "" {
				t.Fatal("docs/embedding.md has two ```go blocks with a package clause; the check builds one")
			}
			whole = b
			continue
		}
		fragments = append(fragments, b)
	}
	if whole == "" || len(fragments) < 4 {
		t.Fatalf("docs/embedding.md has no whole-file ```go block or only %d fragments; the check would prove nothing", len(fragments))
	}
	return whole, fragments
}

func TestEmbeddingDocFragmentsAreInTheWholeFile(t *testing.T) {
	whole, fragments := splitDoc(t, readEmbeddingDoc(t))
	for _, l := range missingFragmentLines(whole, fragments) {
		t.Errorf("docs/embedding.md: the fragment line %q is not a line of the whole file under \"The calls in one file\"", l)
	}
	// The comparison flags a line that is not there, so a pass means it.
	if got := missingFragmentLines("a := 1\n", []string{"a := 1\n", "b := 2\n"}); len(got) != 1 || got[0] != "b := 2" {
		t.Fatalf("missingFragmentLines = %q, want [b := 2]", got)
	}
}

// TestEmbeddingDocCompiles builds docs/embedding.md's whole file in a
// module of its own that requires this one by its public path (replaced by
// the working tree), as a broker outside this repository would import the
// kit. The requirements and their sums are this module's; the go command
// may still fetch, through GOPROXY, go.mod files of requirements' own
// requirements that this module's builds never loaded (a fresh machine's
// module cache lacked gopkg.in/check.v1's, which go-semver's graph names:
// with GOPROXY=off the test failed there).
func TestEmbeddingDocCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own; -short skips it")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the doc's example: %v", err)
	}
	root := repoRoot(t)
	whole, _ := splitDoc(t, readEmbeddingDoc(t))
	dir := t.TempDir()
	gomod := "module example.com/mybroker\n\ngo 1.26.0\n\nrequire github.com/kproxy/kproxy v0.0.0\n\nreplace github.com/kproxy/kproxy => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "mybroker.go": []byte(whole)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gobin, "vet", "-mod=mod", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/embedding.md's whole file does not build against the lease kit's public path: %v\n%s", err, out)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func readEmbeddingDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
