package testkit_test

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The module's import direction, bottom to top: the etcd contract, then
// small libraries, then routing and the lease kit, then the routing
// feeders, then the proxy and the stub broker, then the assembly of both,
// then the binary, and above it all the tools only tests and benches use.
// A package may import its own rank only within its family (its first path
// element), so the proxy and the stub broker never import each other. Like
// lease's deps test this reads `go list`; it covers every
// package, so a new one must be given a rank here.
const module = "github.com/kproxy/kproxy/"

const (
	rankContract = iota
	rankLibrary
	rankBase
	rankFeeder
	rankServer
	rankAssembly
	rankBinary
	rankTool
)

// ranks maps a module-relative path prefix (by path element) to its rank;
// the longest prefix wins.
var ranks = map[string]int{
	"layout":              rankContract,
	"retry":               rankLibrary,
	"internal/commalist":  rankLibrary,
	"internal/devcert":    rankLibrary,
	"internal/etcdlocal":  rankLibrary,
	"internal/etcdmirror": rankLibrary,
	"internal/crc32c":     rankLibrary,
	"internal/kcodec":     rankLibrary,
	"internal/kwire":      rankLibrary,
	"internal/promreg":    rankLibrary,
	"internal/ratelog":    rankLibrary,
	"internal/reload":     rankLibrary,
	"internal/tlsreload":  rankLibrary,
	"routing":             rankBase,
	"lease":               rankBase,
	"refbroker/store":     rankBase,
	"leasewatch":          rankFeeder,
	"proxy":               rankServer,
	"refbroker/broker":    rankServer,
	"assembly":            rankAssembly,
	"cmd/kproxy":          rankBinary,

	"testkit":                          rankTool,
	"bench":                            rankTool,
	"integration":                      rankTool,
	"cmd/kbench":                       rankTool,
	"internal/etcdlocal/etcdtest":      rankTool,
	"internal/kwire/kwiretest":         rankTool,
	"assembly/devcluster/devtest":      rankTool,
	"assembly/devcluster/proxytest":    rankTool,
	"leasewatch/kafscale/kafscaletest": rankTool,
}

// proxyLevels order the proxy family inside its rank, bottom to top (the
// longest prefix wins; "proxy" is the root package alone): the security
// libraries, quotas, the upstream pool and client zones; the per-API dispatcher; the
// listeners (TLS and the SASL gate a connection consults, beside the
// connection server: they speak the dispatcher's types, so no package under
// proxy/security does); the client-connection server and the admin endpoint; and the
// assembly that wires them all. A proxy package imports only its own level
// or below, so the root never reaches the assembly or the admin endpoint.
var proxyLevels = map[string]int{
	"proxy/security":         0,
	"proxy/quota":            0,
	"proxy/upstream":         0,
	"proxy/zone":             0,
	"proxy/proxyproto":       0,
	"proxy/crypt":            0,
	"proxy/apis/recordcheck": 0, // a library of the dispatcher; crypt reads records with it
	"proxy/apis":             1,
	"proxy/listener":         2,
	"proxy":                  3,
	"proxy/admin":            3,
	"proxy/assembly":         4,
}

// proxyLevel is pkg's level in the proxy family and the entry that gives
// it; false for a package of the family that no entry but the root's
// covers.
func proxyLevel(pkg string) (int, string, bool) {
	if pkg == "proxy" {
		return proxyLevels["proxy"], "proxy", true
	}
	best := ""
	for p := range proxyLevels {
		if p != "proxy" && under(pkg, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return 0, "", false
	}
	return proxyLevels[best], best, true
}

// forbidden are imports the ranks allow but the roles do not: the stub
// broker stands for brokers outside this repository, which have no
// routing table; the routing side knows no broker; a bench or a test tool
// is no place for the integration suite's code, and test tools depend on
// no bench or binary.
var forbidden = map[string][]string{
	"refbroker":  {"proxy", "routing", "leasewatch"},
	"routing":    {"refbroker", "lease"},
	"leasewatch": {"refbroker", "lease"},
	"bench":      {"integration"},
	"testkit":    {"integration", "bench", "cmd"},
}

// under reports whether pkg is prefix or below it, by path element.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// longest is the longest key of m that pkg is under, "" for none.
func longest[V any](m map[string]V, pkg string) string {
	best := ""
	for p := range m {
		if under(pkg, p) && len(p) > len(best) {
			best = p
		}
	}
	return best
}

func rankOf(pkg string) (int, bool) {
	p := longest(ranks, pkg)
	if p == "" {
		return 0, false
	}
	return ranks[p], true
}

func family(pkg string) string {
	f, _, _ := strings.Cut(pkg, "/")
	return f
}

// edgeProblem says what is wrong with from importing to (module-relative
// paths), "" when nothing is.
func edgeProblem(from, to string) string {
	rf, okf := rankOf(from)
	rt, okt := rankOf(to)
	switch {
	case !okf:
		return "has no rank in layering_test.go"
	case !okt:
		return "imports " + to + ", which has no rank in layering_test.go"
	case rt > rf:
		return "imports " + to + ", which sits above it"
	case rt == rf && rf != rankTool && family(from) != family(to):
		return "imports " + to + ", a sibling of another family at its own level"
	}
	if family(from) == "proxy" && family(to) == "proxy" {
		lf, ef, okf := proxyLevel(from)
		lt, et, okt := proxyLevel(to)
		switch {
		case !okf:
			return "has no level in proxyLevels (layering_test.go)"
		case !okt:
			return "imports " + to + ", which has no level in proxyLevels (layering_test.go)"
		case lt > lf:
			return "imports " + to + ", which sits above it in the proxy family"
		case lt == lf && ef != et && lf > 0:
			// Above the libraries, parts at one level stay apart: the
			// connection server and the admin endpoint meet only in the
			// assembly.
			return "imports " + to + ", a sibling at its level of the proxy family"
		}
	}
	if p := longest(forbidden, from); p != "" {
		for _, bad := range forbidden[p] {
			if under(to, bad) {
				return "imports " + to + ": " + p + " must not use " + bad
			}
		}
	}
	return ""
}

// listImports returns each package of the module (module-relative) with its
// module-internal non-test imports.
func listImports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, module+"...")...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	pkgs := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		var own []string
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		pkgs[strings.TrimPrefix(f[0], module)] = own
	}
	return pkgs
}

func TestImportsFlowDown(t *testing.T) {
	for _, tags := range []string{"", "kproxy_unsafe"} {
		pkgs := listImports(t, tags)
		if len(pkgs) < 50 || pkgs["proxy"] == nil || pkgs["cmd/kproxy"] == nil {
			t.Fatalf("go list found %d packages (proxy imports %v); the check would prove nothing", len(pkgs), pkgs["proxy"])
		}
		for _, from := range slices.Sorted(func(yield func(string) bool) {
			for p := range pkgs {
				if !yield(p) {
					return
				}
			}
		}) {
			if _, ok := rankOf(from); !ok {
				t.Errorf("%s has no rank in layering_test.go: give it one", from)
				continue
			}
			for _, to := range pkgs[from] {
				if p := edgeProblem(from, to); p != "" {
					t.Errorf("tags %q: %s %s", tags, from, p)
				}
			}
		}
	}
}

// TestBenchLinksNoIntegration checks the whole dependency tree of the
// benches, not only their direct imports.
func TestBenchLinksNoIntegration(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"bench/...").Output()
	if err != nil {
		t.Fatalf("go list -deps bench/...: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"bench/harness") {
		t.Fatalf("go list -deps bench/... has no bench/harness; the check would prove nothing:\n%s", out)
	}
	for _, d := range deps {
		if under(d, module+"integration") {
			t.Errorf("the benches depend on %s", d)
		}
	}
}

// The rules flag what they should, so a passing run means something.
func TestEdgeProblem(t *testing.T) {
	tests := []struct {
		from, to string
		bad      bool
	}{
		{"proxy", "routing", false},
		{"proxy/assembly", "leasewatch", false},
		{"proxy/apis", "proxy/security/authz", false},
		{"leasewatch", "internal/etcdmirror", false},
		{"refbroker/broker", "internal/etcdmirror", false},
		{"assembly/devcluster", "proxy", false},
		{"assembly/devcluster", "refbroker/broker", false},
		{"cmd/kproxy", "assembly/devcluster", false},
		{"bench/scale", "testkit/testrig", false},
		{"integration/chaos", "testkit/testrig", false},
		{"refbroker/broker", "leasewatch/mirror", true},
		{"lease", "routing", true},
		{"leasewatch/kafscale", "lease", true},
		{"refbroker/broker", "leasewatch", true},
		{"refbroker/broker", "proxy", true},
		{"proxy", "refbroker/broker", true},
		{"routing", "lease", true},
		{"routing", "leasewatch", true},
		{"layout", "routing", true},
		{"internal/etcdmirror", "leasewatch", true},
		{"proxy", "assembly/devcluster", true},
		{"assembly/devcluster", "cmd/kproxy", true},
		{"cmd/kproxy", "testkit/testrig", true},
		{"cmd/kproxy", "internal/etcdlocal/etcdtest", true},
		{"bench/scale", "integration/chaos/cluster", true},
		{"testkit/testrig", "integration/chaos/cluster", true},
		{"testkit/hostile", "bench/harness", true},
		{"somewhere/new", "layout", true},
		{"proxy/assembly", "proxy", false},
		{"proxy/assembly", "proxy/admin", false},
		{"proxy", "proxy/listener", false},
		{"proxy/listener", "proxy/apis", false},
		{"proxy/security/authz", "proxy/security/principal", false},
		{"proxy", "proxy/assembly", true},
		{"proxy", "proxy/admin", true},
		{"proxy/admin", "proxy/assembly", true},
		{"proxy/apis", "proxy", true},
		{"proxy/apis", "proxy/listener", true},
		{"proxy/listener", "proxy", true},
		{"proxy/security/credstore", "proxy/apis", true},
		{"proxy/security/audit", "proxy/apis/local", true},
		{"proxy/upstream", "proxy/apis", true},
		{"proxy/somewhere", "proxy/apis", true},
	}
	for _, tt := range tests {
		if got := edgeProblem(tt.from, tt.to) != ""; got != tt.bad {
			t.Errorf("edgeProblem(%q, %q) = %q; flagged %v, want %v", tt.from, tt.to, edgeProblem(tt.from, tt.to), got, tt.bad)
		}
	}
}

// internalMustNotReach are the module's upper ranks: internal/ holds only
// leaf libraries (and their test helpers), so nothing under it depends on
// them, directly or through another package.
var internalMustNotReach = []string{"proxy", "refbroker", "lease", "leasewatch", "routing", "assembly", "testkit", "bench", "integration", "cmd"}

// internalReachUp returns, for each package under internal/ in deps (a
// package to its module-relative dependencies), the upper-rank packages it
// depends on.
func internalReachUp(deps map[string][]string) []string {
	var bad []string
	for _, pkg := range slices.Sorted(maps.Keys(deps)) {
		if !under(pkg, "internal") {
			continue
		}
		for _, d := range deps[pkg] {
			if slices.ContainsFunc(internalMustNotReach, func(up string) bool { return under(d, up) }) {
				bad = append(bad, pkg+" depends on "+d)
			}
		}
	}
	return bad
}

// TestInternalHoldsOnlyLeaves reads the whole dependency tree (go list's
// Deps, test files included) of every package under internal/.
func TestInternalHoldsOnlyLeaves(t *testing.T) {
	out, err := exec.Command("go", "list", "-test", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list -test internal/...: %v", err)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// A test variant is "pkg [pkg.test]"; name it by its package.
		pkg, _ := strings.CutPrefix(f[0], module)
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, module); ok {
				deps[pkg] = append(deps[pkg], rel)
			}
		}
	}
	if !slices.Contains(deps["internal/tlsreload"], "internal/devcert") {
		t.Fatalf("go list gave no internal/devcert among internal/tlsreload's test dependencies; the check would prove nothing:\n%s", out)
	}
	for _, b := range internalReachUp(deps) {
		t.Error(b)
	}
	if got := internalReachUp(map[string][]string{"internal/x": {"layout", "proxy/apis"}, "bench": {"proxy"}}); len(got) != 1 {
		t.Errorf("internalReachUp flags %q, want only internal/x's proxy/apis", got)
	}
}

// TestSecurityBelowTheDispatcher reads the whole dependency tree of
// proxy/security/...: the security libraries sit below the dispatcher, so
// none depends on proxy/apis or anything under it.
func TestSecurityBelowTheDispatcher(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"proxy/security/...").Output()
	if err != nil {
		t.Fatalf("go list -deps proxy/security/...: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"proxy/security/principal") {
		t.Fatalf("go list -deps proxy/security/... has no proxy/security/principal; the check would prove nothing:\n%s", out)
	}
	for _, d := range deps {
		if under(d, module+"proxy/apis") {
			t.Errorf("proxy/security/... depends on %s", d)
		}
	}
}
