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
	"math/rand/v2"
	"net"
	"strconv"
)

// FreeAddr is a 127.0.0.1 address with a port that was free a moment ago,
// for a process that binds it itself. The port is drawn at random below
// Linux's ephemeral range (32768-60999 by default), not asked of the
// kernel with port 0: a port the kernel hands out is also what it hands the
// next outgoing connection of any process as its local port, so a freed
// one was often taken before the process started (seen as "address
// already in use" when tests ran in parallel). Another FreeAddr caller may
// still draw the same port, which at random over 12,000 ports is rare.
func FreeAddr() (string, error) {
	var err error
	for range 64 {
		port := freeLow + rand.IntN(freeHigh-freeLow)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return l.Addr().String(), nil
		}
	}
	return "", fmt.Errorf("find a free port in %d-%d: %w", freeLow, freeHigh, err)
}

// The range FreeAddr draws from: above the well-known and common service
// ports, below the ephemeral range.
const freeLow, freeHigh = 20000, 32768

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
