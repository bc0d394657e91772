//go:build !kproxy_unsafe

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/refbroker/broker"
)

// The product build: no test-only switches (see unsafe.go).

func unsafeBrokerFlags() []cli.Flag { return nil }

func applyUnsafeBrokerFlags(*cli.Context, *broker.Config) {}
