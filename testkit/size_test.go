package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The house rule: functions fit on a screen and files stay small, outside
// tests and tables.
const (
	maxFuncLines = 80
	maxFileLines = 500
)

// sizeExempt are the known exceptions, each with its reason; an entry that
// is no longer over its limit fails the test, so the list only shrinks.
var sizeExempt = map[string]string{
	"proxy/apis/table.go:rows": "the table of APIs, one row per API",
}

// eachSource calls fn with each non-test .go file under root
// (module-relative) and its text, skipping testdata, hidden folders and
// other modules (a folder with its own go.mod).
func eachSource(t *testing.T, root string, fn func(rel string, src []byte) error) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != root && (err == nil || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return fn(filepath.ToSlash(rel), src)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tooBig lists the non-test functions over maxFuncLines ("file:func") and
// the non-test files over maxFileLines ("file") under root.
func tooBig(t *testing.T, root string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	eachSource(t, root, func(rel string, src []byte) error {
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if fset.File(f.Pos()).LineCount() > maxFileLines {
			out = append(out, rel)
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil &&
				fset.Position(fd.End()).Line-fset.Position(fd.Pos()).Line+1 > maxFuncLines {
				out = append(out, rel+":"+fd.Name.Name)
			}
		}
		return nil
	})
	return out
}

func TestFunctionsAndFilesAreSmall(t *testing.T) {
	big := tooBig(t, repoRoot(t))
	for _, b := range big {
		if _, ok := sizeExempt[b]; !ok {
			t.Errorf("%s is over %d lines (a function) or %d lines (a file): split it by job", b, maxFuncLines, maxFileLines)
		}
	}
	for e := range sizeExempt {
		if !slices.Contains(big, e) {
			t.Errorf("%s is exempt in size_test.go but no longer too big: remove it from sizeExempt", e)
		}
	}
}

// tooBig sees a long function and a long file, and skips tests.
func TestTooBigFlags(t *testing.T) {
	dir := t.TempDir()
	long := "package p\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	files := map[string]string{
		"long.go":      long,
		"big.go":       "package p\n" + strings.Repeat("\n", maxFileLines) + "func Short() {}\n",
		"long_test.go": long,
		"ok.go":        "package p\n\nfunc OK() {}\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := tooBig(t, dir)
	slices.Sort(got)
	if want := []string{"big.go", "long.go:Long"}; !slices.Equal(got, want) {
		t.Fatalf("tooBig = %q, want %q", got, want)
	}
}
