package lease_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The lease kit is meant to be imported by brokers outside this repository:
// building it must not pull in the proxy, the stub broker, a Kafka client
// or etcd's server (which a broker that talks to an external etcd does not
// want, and confluent-kafka-go needs cgo).
const leasePkg = "github.com/kproxy/kproxy/lease"

// forbiddenDeps are import path prefixes (a path equal to one, or below it).
var forbiddenDeps = []string{
	"github.com/kproxy/kproxy/proxy",
	"github.com/kproxy/kproxy/routing",
	"github.com/kproxy/kproxy/refbroker/broker",
	"github.com/kproxy/kproxy/leasewatch",
	"github.com/IBM/sarama",
	"github.com/confluentinc/confluent-kafka-go",
	"github.com/segmentio/kafka-go",
	"go.etcd.io/etcd/server",
	"testing",
}

// allowedOwn are the only packages of this module the lease kit may use:
// itself and the contract.
var allowedOwn = []string{leasePkg, "github.com/kproxy/kproxy/layout"}

// badDeps returns the packages in deps the lease kit must not depend on.
func badDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		forbidden := slices.ContainsFunc(forbiddenDeps, func(f string) bool {
			return d == f || strings.HasPrefix(d, f+"/")
		})
		own := d == "github.com/kproxy/kproxy" || strings.HasPrefix(d, "github.com/kproxy/kproxy/")
		if forbidden || (own && !slices.Contains(allowedOwn, d)) {
			bad = append(bad, d)
		}
	}
	return bad
}

func TestLeaseDependsOnlyOnTheContractAndEtcdClient(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the lease kit's dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", leasePkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", leasePkg, err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "go.etcd.io/etcd/client/v3") || !slices.Contains(deps, leasePkg) {
		t.Fatalf("go list -deps gave no etcd client or no lease package; the check would prove nothing:\n%s", out)
	}
	if bad := badDeps(deps); len(bad) > 0 {
		t.Fatalf("%s depends on packages an embedding broker must not need:\n  %s", leasePkg, strings.Join(bad, "\n  "))
	}
}

// The check itself flags what it should, so a passing run means something.
func TestBadDepsFlagsForbiddenPackages(t *testing.T) {
	tests := []struct {
		dep string
		bad bool
	}{
		{"github.com/kproxy/kproxy/layout", false},
		{leasePkg, false},
		{"go.etcd.io/etcd/client/v3", false},
		{"google.golang.org/grpc", false},
		{"github.com/kproxy/kproxy/proxy/apis", true},
		{"github.com/kproxy/kproxy/routing", true},
		{"github.com/kproxy/kproxy/refbroker/broker/schema", true},
		{"github.com/kproxy/kproxy/internal/etcdmirror", true},
		{"github.com/kproxy/kproxy/internal/etcdlocal", true},
		{"github.com/IBM/sarama", true},
		{"github.com/confluentinc/confluent-kafka-go/v2/kafka", true},
		{"github.com/segmentio/kafka-go", true},
		{"go.etcd.io/etcd/server/v3/embed", true},
		{"testing", true},
		{"testing/iotest", true},
		{"github.com/IBM/saramax", false}, // a prefix match is by path element
	}
	for _, tt := range tests {
		if got := len(badDeps([]string{tt.dep})) == 1; got != tt.bad {
			t.Errorf("badDeps(%q) flags it: %v, want %v", tt.dep, got, tt.bad)
		}
	}
}
