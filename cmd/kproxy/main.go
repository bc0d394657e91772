// Command kproxy is the one binary of the project: the proxy (serve), the stub
// broker (broker), a whole local cluster in one process (dev), a reader of
// the proxy's routing table (routes), a single-member etcd for local use
// (etcd), and the ACL and SCRAM-user administration (acls, users). It only
// parses flags and wires packages.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "kproxy:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "kproxy",
		Usage: "partition-aware Kafka routing proxy for stateless brokers with etcd ownership",
		Commands: []*cli.Command{
			serveCommand(),
			brokerCommand(),
			devCommand(),
			routesCommand(),
			etcdCommand(),
			aclsCommand(),
			usersCommand(),
		},
	}
}
