//go:build kproxy_unsafe

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/broker-stub/broker"
)

// This file is compiled only with -tags kproxy_unsafe: the fault suite
// (integration/chaos) builds its broker so, to show what fencing prevents.
// The product binary has neither the flag nor the code behind it; the test
// in product_test.go checks both builds.

func unsafeBrokerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "unsafe-disable-fencing", Usage: "TEST ONLY: commit without the fencing compare, like the broken systems in shared/context"},
	}
}

func applyUnsafeBrokerFlags(c *cli.Context, cfg *broker.Config) {
	cfg.DisableFencing = c.Bool("unsafe-disable-fencing")
}
