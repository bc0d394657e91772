package testkit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	root, doc := readArchDoc(t)
	named := map[string]bool{}
	for _, m := range docPath.FindAllStringSubmatch(doc, -1) {
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

// mapRow is the package and files of one row of the package map that names
// exactly one package and only files.
type mapRow struct {
	pkg   string
	files []string
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// singlePackageRows returns the rows of the map's table whose first cell
// is one package directory and whose second cell names only .go files.
func singlePackageRows(doc string) []mapRow {
	var rows []mapRow
	for line := range strings.Lines(doc) {
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if len(cells) < 3 || !strings.HasPrefix(cells[0], "| `") {
			continue
		}
		first := backquoted.FindAllStringSubmatch(cells[0], -1)
		if len(first) != 1 || !strings.HasSuffix(first[0][1], "/") || strings.TrimSpace(strings.TrimPrefix(cells[0], "|")) != "`"+first[0][1]+"`" {
			continue
		}
		row := mapRow{pkg: strings.TrimSuffix(first[0][1], "/")}
		onlyFiles := true
		for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
			onlyFiles = onlyFiles && strings.HasSuffix(m[1], ".go")
			row.files = append(row.files, m[1])
		}
		if onlyFiles && len(row.files) > 0 {
			rows = append(rows, row)
		}
	}
	return rows
}

// TestArchitectureMapListsEveryFile: a row of the map that names one
// package lists all of its non-test files, so the column cannot silently
// list only some.
func TestArchitectureMapListsEveryFile(t *testing.T) {
	root, doc := readArchDoc(t)
	rows := singlePackageRows(doc)
	if len(rows) < 15 {
		t.Fatalf("the map has %d rows naming one package and its files; the check would prove nothing", len(rows))
	}
	for _, r := range rows {
		for _, f := range nonTestGoFiles(t, filepath.Join(root, r.pkg)) {
			if !slices.Contains(r.files, r.pkg+"/"+f) {
				t.Errorf("docs/architecture.md: the row of `%s/` does not list `%s/%s`: add it to the row", r.pkg, r.pkg, f)
			}
		}
	}
}

// fileFunc finds a claim that a file holds a function: "`f.go`: `Name`"
// or "`f.go`'s `Name`" (a name may be written `A`/`B`).
var fileFunc = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`(?::|'s) `([A-Za-z_][A-Za-z0-9_]*)`")

// TestArchitectureStepsNameTheRightFile: each function the map's steps
// name as a file's is declared in that file (a function, a method or a
// type), so a step cannot point at the wrong file.
func TestArchitectureStepsNameTheRightFile(t *testing.T) {
	root, doc := readArchDoc(t)
	claims := fileFunc.FindAllStringSubmatch(doc, -1)
	if len(claims) < 15 {
		t.Fatalf("the map names %d functions as a file's; the check would prove nothing", len(claims))
	}
	for _, c := range claims {
		src, err := os.ReadFile(filepath.Join(root, c[1]))
		if err != nil {
			t.Errorf("docs/architecture.md names %s, which is not in the tree", c[1])
			continue
		}
		decl := regexp.MustCompile(`(?m)^(func (\([^)]*\) )?|type |\t)` + c[2] + `\b[\[( ]`)
		if !decl.Match(src) {
			t.Errorf("docs/architecture.md says %s has %s; it does not declare it", c[1], c[2])
		}
	}
}

// readArchDoc returns the repository root and docs/architecture.md.
func readArchDoc(t *testing.T) (root, doc string) {
	t.Helper()
	root = repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("read the map: %v", err)
	}
	return root, string(b)
}
