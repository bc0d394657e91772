//go:build kproxy_unsafe

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/refbroker/broker"
)

// This file is compiled only with -tags kproxy_unsafe: the fault suite
// (integration/chaos) builds its broker so, to show what fencing prevents.
// The product binary has no way to turn fencing off: it lacks this flag,
// and nothing else sets broker.Config.DisableFencing. The unfenced commit
// behind it (partlog's plainCommit) is compiled into every build, since the
// stub broker's packages take no build tags; the test in product_test.go
// checks that only the tagged build knows the flag.

func unsafeBrokerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "unsafe-disable-fencing", Usage: "TEST ONLY: commit without the fencing compare, like the broken systems in docs/background.md"},
	}
}

func applyUnsafeBrokerFlags(c *cli.Context, cfg *broker.Config) {
	cfg.DisableFencing = c.Bool("unsafe-disable-fencing")
}
