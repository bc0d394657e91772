package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/listener"
)

// listenerFlags are Kafka's listener settings; --listen and --advertise
// remain the one-PLAINTEXT-listener shorthand.
func listenerFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("listeners", "", "Kafka-style listeners, comma-separated NAME://HOST:PORT (NAME a security protocol PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or a name in --listener-security-protocol-map); replaces --listen"),
		stringFlag("advertised-listeners", "", "NAME://HOST:PORT per listener: the address Metadata gives clients that came in on it (default: its bound address); replaces --advertise"),
		stringFlag("listener-security-protocol-map", "", "NAME:PROTOCOL pairs, comma-separated, for listeners not named after their protocol"),
	}
}

// listenersFromFlags returns the configured listeners, or nil when only
// --listen (and --advertise) are set.
func listenersFromFlags(c *cli.Context) ([]listener.Listener, error) {
	if c.String("listeners") == "" {
		if c.String("advertised-listeners") != "" {
			return nil, fmt.Errorf("--advertised-listeners needs --listeners")
		}
		return nil, nil
	}
	ls, err := listener.ParseListeners(c.String("listeners"), c.String("advertised-listeners"), c.String("listener-security-protocol-map"))
	if err != nil {
		return nil, fmt.Errorf("--listeners: %w", err)
	}
	return ls, nil
}
