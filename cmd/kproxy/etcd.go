package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/etcdlocal"
)

// etcdCommand runs a single-member embedded etcd, for benchmarks and for
// trying the multi-process setup without installing etcd.
func etcdCommand() *cli.Command {
	return &cli.Command{
		Name:   "etcd",
		Usage:  "run a single-member embedded etcd on 127.0.0.1 (development and benchmarks)",
		Hidden: true,
		Flags: []cli.Flag{
			stringFlag("listen-client", "127.0.0.1:2379", "client address"),
			stringFlag("data-dir", "", "data folder (default: temporary, removed on exit)"),
			stringFlag("log-level", "error", "etcd's own log level"),
		},
		Action: func(c *cli.Context) error {
			s, err := etcdlocal.Start(c.Context, etcdlocal.Config{
				Dir: c.String("data-dir"), ClientAddr: c.String("listen-client"), LogLevel: c.String("log-level"),
			})
			if err != nil {
				return err
			}
			defer s.Close()
			fmt.Fprintf(c.App.Writer, "etcd serving clients at %s (data in %s)\n", s.Endpoint, s.Dir)
			<-c.Context.Done()
			return nil
		},
	}
}
