package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// testOnly are packages the product binary must not link: the testing
// package (and its sub-packages) and the rigs only tests use.
var testOnly = []string{"testing", "github.com/kproxy/kproxy/testkit",
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest", "github.com/kproxy/kproxy/assembly/devcluster/devtest",
	"github.com/kproxy/kproxy/assembly/devcluster/proxytest"}

// wiredByAssembly are the parts proxy/assembly builds: the binary takes
// flags into their configurations and leaves the building to it, so it
// imports none of them itself.
var wiredByAssembly = []string{
	"github.com/kproxy/kproxy/proxy/apis", "github.com/kproxy/kproxy/proxy/upstream",
	"github.com/kproxy/kproxy/proxy/admin", "github.com/kproxy/kproxy/leasewatch",
}

// TestBinaryWiresThroughAssembly: cmd/kproxy stays thin, flags and wiring
// only; the proxy is assembled by proxy/assembly.
func TestBinaryWiresThroughAssembly(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if !slices.Contains(imports, "github.com/kproxy/kproxy/proxy/assembly") {
		t.Fatalf("cmd/kproxy does not import proxy/assembly; its imports:\n%s", out)
	}
	for _, imp := range imports {
		if slices.Contains(wiredByAssembly, imp) {
			t.Errorf("cmd/kproxy imports %s, which proxy/assembly wires", imp)
		}
	}
}

// TestProductLinksNoTestCode lists kproxy's dependencies, as built for
// release and as built for the fault suite: neither may link a test-only
// package.
func TestProductLinksNoTestCode(t *testing.T) {
	for _, tags := range []string{"", testrig.UnsafeTag} {
		args := []string{"list", "-deps"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, ".")...).Output()
		if err != nil {
			t.Fatalf("go %s .: %v", strings.Join(args, " "), err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 50 {
			t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
		}
		for _, d := range deps {
			for _, bad := range testOnly {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("kproxy built with tags %q links %s", tags, d)
				}
			}
		}
	}
}

// TestUnsafeFlagOnlyWithTag builds kproxy with and without the unsafe tag:
// only the tagged build knows --unsafe-disable-fencing, in its help and in
// its bytes.
func TestUnsafeFlagOnlyWithTag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	const flag = "unsafe-disable-fencing"
	dir := t.TempDir()
	product, unsafe := filepath.Join(dir, "kproxy"), filepath.Join(dir, "kproxy-unsafe")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := testrig.Build(ctx, "", testrig.Target{Pkg: testrig.KproxyPkg, Out: product},
		testrig.Target{Pkg: testrig.KproxyPkg, Out: unsafe, Tags: []string{testrig.UnsafeTag}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin  string
		want bool
	}{{product, false}, {unsafe, true}} {
		help, err := exec.CommandContext(ctx, c.bin, "broker", "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s broker --help: %v\n%s", c.bin, err, help)
		}
		if !bytes.Contains(help, []byte("--lease-ttl")) {
			t.Fatalf("%s broker --help is not the broker's help:\n%s", c.bin, help)
		}
		if got := bytes.Contains(help, []byte("--"+flag)); got != c.want {
			t.Errorf("%s broker --help mentions --%s: %v, want %v", filepath.Base(c.bin), flag, got, c.want)
		}
		b, err := os.ReadFile(c.bin)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte(flag)); got != c.want {
			t.Errorf("%s contains %q: %v, want %v", filepath.Base(c.bin), flag, got, c.want)
		}
	}
}
