package chaos

import (
	"context"
	"path/filepath"

	"github.com/kproxy/kproxy/testkit/testrig"
)

// Binaries are the programs the suite runs as processes.
type Binaries struct {
	Kproxy     string // built with testrig.UnsafeTag: the mutation run disables fencing
	EtcdMember string
}

// Build compiles cmd/kproxy (with the unsafe tag, so that brokers accept
// --unsafe-disable-fencing) and the etcdmember command into dir. moduleRoot
// is the repository root ("" means: find go.mod upwards from the working
// directory).
func Build(ctx context.Context, moduleRoot, dir string) (Binaries, error) {
	b := Binaries{Kproxy: filepath.Join(dir, "kproxy"), EtcdMember: filepath.Join(dir, "etcdmember")}
	return b, testrig.Build(ctx, moduleRoot,
		testrig.Target{Pkg: testrig.KproxyPkg, Out: b.Kproxy, Tags: []string{testrig.UnsafeTag}},
		testrig.Target{Pkg: testrig.EtcdMemberPkg, Out: b.EtcdMember})
}
