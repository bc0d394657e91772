package testkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The proxy's shape (issues 23 and 28): a client-connection root that
// imports little of the module, the methods of its two big types each in
// at most two files, and one job per file of the dispatcher. Like the
// layering test these read the tree as `go list` sees it. (A cap on files
// per package made files of several jobs; issue 28 withdrew it.)
const (
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

// apisJobs name each job of proxy/apis by the declarations that do it:
// all of a job's are in one file, and no file holds two jobs' (issue 28:
// rules, local answers, SASL, throttling, and routing each kind of
// request). A new job gets an entry; a file may hold what no job names.
var apisJobs = map[string][]string{
	"rules (authorization glue)": {"serveDecoded", "patchOp", "guard", "session", "topicCheck"},
	"local answers from stores":  {"beginACLs", "beginDescribeSCRAM", "beginAlterSCRAM", "beginDescribeClientQuotas", "beginAlterClientQuotas", "storeOp"},
	"local cluster answers":      {"beginMetadata", "beginFindCoordinator", "beginDescribeCluster"},
	"SASL":                       {"beginSASL", "answerSASL"},
	"throttling":                 {"SetThrottle", "reencodeThrottle", "throttleAt"},
	"versions":                   {"versions", "beginApiVersions"},
	"routing to any broker":      {"beginAdmin", "forwardOp"},
	"routing to a coordinator":   {"beginGroup", "groupList"},
	"routing to every broker":    {"beginListGroups", "listGroupsOp"},
	"routing produce":            {"beginProduce", "produceOp"},
	"routing fetch":              {"beginFetch", "fetchOp"},
	"routing offsets":            {"beginOffsets", "partList"},
	"the table":                  {"rows", "buildTable", "holdOf"},
}

// declFiles maps each top-level function, method and type name of the
// package in dir to the non-test files declaring it (a method by its own
// name).
func declFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string][]string{}
	add := func(name, file string) {
		if !slices.Contains(out[name], file) {
			out[name] = append(out[name], file)
		}
	}
	for _, name := range nonTestGoFiles(t, dir) {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				add(d.Name.Name, name)
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						add(sp.Name.Name, name)
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							add(n.Name, name)
						}
					}
				}
			}
		}
	}
	return out
}

// jobProblems says where jobs' declarations (decls: name to files) are
// spread over files or share one.
func jobProblems(jobs map[string][]string, decls map[string][]string) []string {
	var p []string
	fileJob := map[string]string{}
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		var files []string
		for _, name := range jobs[job] {
			got := decls[name]
			if len(got) == 0 {
				p = append(p, job+": "+name+" is declared nowhere; update apisJobs")
			}
			for _, f := range got {
				if !slices.Contains(files, f) {
					files = append(files, f)
				}
			}
		}
		if len(files) > 1 {
			p = append(p, job+" is spread over "+strings.Join(files, ", "))
		}
		for _, f := range files {
			if other, ok := fileJob[f]; ok && other != job {
				p = append(p, f+" holds two jobs: "+other+" and "+job)
			}
			fileJob[f] = job
		}
	}
	return p
}

func TestAPIsOneJobPerFile(t *testing.T) {
	dir := goList(t, "{{.Dir}}", module+"proxy/apis")[0]
	for _, p := range jobProblems(apisJobs, declFiles(t, dir)) {
		t.Error(p)
	}
	jobs := map[string][]string{"a": {"A1", "A2"}, "b": {"B"}}
	if got := jobProblems(jobs, map[string][]string{"A1": {"x.go"}, "A2": {"y.go"}, "B": {"x.go"}}); len(got) != 2 {
		t.Errorf("jobProblems flags %q, want a spread over x.go and y.go, and x.go holding two jobs", got)
	}
}
