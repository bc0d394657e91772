// Package testrig is the one home of the rigs that only tests and test tools
// (the fault suite, the benchmark harness) use: a free port, building the
// kproxy binaries, supervising their processes, launching brokers and
// proxies as processes against an etcd. (The in-process cluster's test
// wrapper is devcluster/devtest, beside etcdlocal/etcdtest.)
//
// The promise: every process a rig starts is ended by its Close (or by the
// test process dying: children get SIGKILL through the parent-death signal).
// The limit: Linux only (process groups, Pdeathsig, /proc), 127.0.0.1 only.
// The product binary must never import it; cmd/kproxy's product test checks.
// It imports neither testing (the tools that use it do not link it) nor the
// proxy or the broker, so that any package's tests can use it.
package testrig

import (
	"fmt"
	"net"
)

// FreeAddr is a 127.0.0.1 address with a port that was free a moment ago.
// A process started with it binds it itself; another process may take the
// port in between, which on a test machine is rare enough to accept.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FreeAddrs is n addresses from FreeAddr.
func FreeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		a, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}
