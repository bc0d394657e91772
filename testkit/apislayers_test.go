package testkit_test

import (
	"slices"
	"strings"
	"testing"
)

// apisLevels orders proxy/apis and the packages under it, bottom to top:
// the leaves (response builders, record checks, the split engine), then
// what decides and answers on its own (the auth rules, the answers from
// the proxy's stores), then the dispatcher with the table of APIs. Within
// the proxy family ranks allow any import, so this says more: a package
// under proxy/apis imports only lower levels, never the table above it.
// Every package under proxy/apis needs a level here.
var apisLevels = map[string]int{
	"proxy/apis/answer":            0,
	"proxy/apis/recordcheck":       0,
	"proxy/apis/recordcheck/probe": 0, // for tests only: batches built with franz-go
	"proxy/apis/hwfloor":           0,
	"proxy/apis/fetchwait":         0,
	"proxy/apis/split":             0,
	"proxy/apis/authrule":          1,
	"proxy/apis/local":             1,
	"proxy/apis/produceguard":      1,
	"proxy/apis":                   2,
}

func TestAPIsImportDown(t *testing.T) {
	pkgs := listImports(t, "")
	seen := 0
	for from, imports := range pkgs {
		if !under(from, "proxy/apis") {
			continue
		}
		seen++
		lf, ok := apisLevels[from]
		if !ok {
			t.Errorf("%s has no level in apislayers_test.go: give it one", from)
			continue
		}
		for _, to := range imports {
			if !under(to, "proxy/apis") {
				continue
			}
			if lt, ok := apisLevels[to]; ok && lt >= lf {
				t.Errorf("%s (level %d) imports %s (level %d): proxy/apis imports flow down only", from, lf, to, lt)
			}
		}
	}
	if seen < len(apisLevels) {
		t.Fatalf("go list found %d packages under proxy/apis, %d have levels: the check would prove nothing", seen, len(apisLevels))
	}
	if !slices.ContainsFunc(pkgs["proxy/apis"], func(p string) bool { return strings.HasPrefix(p, "proxy/apis/") }) {
		t.Fatal("proxy/apis imports none of its subpackages: the levels are stale")
	}
}
