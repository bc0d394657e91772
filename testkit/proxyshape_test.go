package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The proxy's shape (issue 23): small package roots, a client-connection
// root that imports little of the module, and the methods of its two big
// types each in at most two files. Like the layering test these read the
// tree as `go list` sees it.
const (
	maxProxyFiles        = 12 // non-test .go files in one package directory under proxy/
	maxProxyRootImports  = 10 // module packages the proxy root imports
	maxFilesPerProxyType = 2  // files holding the methods of clientConn, and of Server
)

// goList runs go list -f format on pkgs and returns its lines.
func goList(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	args := append([]string{"list", "-f", format}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// nonTestGoFiles lists dir's .go files that are not tests, whatever their
// build tags (go list's GoFiles would drop the tagged ones).
func nonTestGoFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			out = append(out, n)
		}
	}
	return out
}

func TestProxyPackageRootsAreSmall(t *testing.T) {
	lines := goList(t, "{{.ImportPath}}={{.Dir}}", module+"proxy/...")
	if len(lines) < 10 {
		t.Fatalf("go list found %d packages under proxy/; the check would prove nothing", len(lines))
	}
	for _, l := range lines {
		path, dir, _ := strings.Cut(l, "=")
		rel := strings.TrimPrefix(path, module)
		if files := nonTestGoFiles(t, dir); len(files) > maxProxyFiles {
			t.Errorf("%s has %d non-test files (at most %d): split it by job\n%s", rel, len(files), maxProxyFiles, strings.Join(files, " "))
		}
	}
}

func TestProxyRootImportsLittle(t *testing.T) {
	var own []string
	for _, imp := range goList(t, `{{join .Imports "\n"}}`, module+"proxy") {
		if strings.HasPrefix(imp, module) {
			own = append(own, strings.TrimPrefix(imp, module))
		}
	}
	if len(own) == 0 {
		t.Fatal("go list says the proxy root imports none of the module; the check would prove nothing")
	}
	if len(own) > maxProxyRootImports {
		t.Errorf("the proxy root imports %d of the module's packages (at most %d): wiring belongs in proxy/assembly\n%s",
			len(own), maxProxyRootImports, strings.Join(own, "\n"))
	}
}

// receiverFiles maps each receiver type of the package in dir to the
// non-test files declaring its methods.
func receiverFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, name := range nonTestGoFiles(t, dir) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok && !slices.Contains(out[id.Name], name) {
				out[id.Name] = append(out[id.Name], name)
			}
		}
	}
	return out
}

func TestProxyTypesMethodsTogether(t *testing.T) {
	dir := goList(t, "{{.Dir}}", module+"proxy")[0]
	files := receiverFiles(t, dir)
	for _, typ := range []string{"clientConn", "Server"} {
		got := files[typ]
		if len(got) == 0 {
			t.Errorf("no methods of %s found in %s; the check would prove nothing", typ, dir)
		}
		if len(got) > maxFilesPerProxyType {
			t.Errorf("%s's methods sit in %d files (at most %d): %s", typ, len(got), maxFilesPerProxyType, strings.Join(got, " "))
		}
	}
}

// receiverFiles sees a type's methods across files, so a spread is caught.
func TestReceiverFilesSeesEveryFile(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.go":      "package p\ntype T struct{}\nfunc (T) A() {}\n",
		"b.go":      "package p\nfunc (*T) B() {}\n",
		"c.go":      "package p\nfunc (t *T) C() {}\nfunc F() {}\n",
		"c_test.go": "package p\nfunc (T) D() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := receiverFiles(t, dir)["T"]; len(got) != 3 {
		t.Fatalf("receiverFiles found T's methods in %v, want a.go, b.go and c.go", got)
	}
}
