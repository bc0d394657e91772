package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy"
)

// limitFlags are the proxy's protections from large or hostile clients,
// named after Kafka's settings (proxy.Limits).
func limitFlags() []cli.Flag {
	return []cli.Flag{
		intFlag("queued-max-request-bytes", 256<<20, "request bytes buffered across all client connections, reserved as they arrive (plus one 64 KiB read chunk, nothing for a bare size claim); an eighth of it (at most 8 MiB) only frames of 64 KiB or less may take, so ApiVersions and Metadata are answered while large frames hold the rest; unfinished frames together may hold the rest, past which the largest holder is closed; reads pause while it is reached"),
		durationFlag("frame-grow-wait", 30*time.Second, "how long a client connection holding part of a frame waits for budget for the rest before it is closed"),
		intFlag("max-connections", 0, "open client connections; more are refused at accept (0: no limit)"),
		intFlag("max-connections-per-ip", 0, "open client connections from one IP address (0: no limit)"),
		durationFlag("connections-max-idle", 10*time.Minute, "close a client connection idle this long (negative: never)"),
		durationFlag("bad-input-log-interval", 10*time.Second, "log bad client input at most once per reason per interval, with a count"),
		intFlag("max-unsent-bytes-per-connection", 1<<20, "stop reading a client connection's requests while its answers waiting to be written exceed this (one larger answer still goes out whole; negative: no bound)"),
		intFlag("max-partial-frame-bytes-per-connection", 0, "most of the request budget one connection's unfinished frame may hold; more closes it (0: half of --queued-max-request-bytes)"),
		intFlag("max-partial-frame-bytes-per-ip", 0, "most of the request budget the unfinished frames of one IP's connections may hold together; a frame that would pass it closes that IP's connection holding the largest unfinished frame (0: half of --queued-max-request-bytes)"),
		durationFlag("request-read-timeout", 30*time.Second, "close a client connection whose frame does not arrive whole this long after its first byte (negative: never)"),
	}
}

func limitsFrom(c *cli.Context) (proxy.Limits, error) {
	l := proxy.Limits{
		QueuedMaxRequestBytes: int64(c.Int("queued-max-request-bytes")),
		GrowWait:              c.Duration("frame-grow-wait"),
		MaxConnections:        c.Int("max-connections"),
		MaxConnectionsPerIP:   c.Int("max-connections-per-ip"),
		IdleTimeout:           c.Duration("connections-max-idle"),
		BadInputLogInterval:   c.Duration("bad-input-log-interval"),

		MaxUnsentBytesPerConn:       c.Int("max-unsent-bytes-per-connection"),
		MaxPartialFrameBytesPerConn: int64(c.Int("max-partial-frame-bytes-per-connection")),
		MaxPartialFrameBytesPerIP:   int64(c.Int("max-partial-frame-bytes-per-ip")),
		RequestReadTimeout:          c.Duration("request-read-timeout"),
	}
	switch {
	case l.QueuedMaxRequestBytes-proxy.SmallFrameReserve(l.QueuedMaxRequestBytes) < int64(c.Int("max-frame-bytes")):
		return l, fmt.Errorf("--queued-max-request-bytes %d, less its small-frame reserve of %d, is below --max-frame-bytes %d: the largest frames could never be read",
			l.QueuedMaxRequestBytes, proxy.SmallFrameReserve(l.QueuedMaxRequestBytes), c.Int("max-frame-bytes"))
	case l.MaxConnections < 0 || l.MaxConnectionsPerIP < 0:
		return l, fmt.Errorf("--max-connections and --max-connections-per-ip must not be negative")
	case l.GrowWait <= 0:
		return l, fmt.Errorf("--frame-grow-wait must be positive")
	case l.IdleTimeout == 0:
		return l, fmt.Errorf("--connections-max-idle must not be 0 (negative disables it)")
	case l.MaxUnsentBytesPerConn == 0:
		return l, fmt.Errorf("--max-unsent-bytes-per-connection must not be 0 (negative disables it)")
	case l.MaxPartialFrameBytesPerConn < 0 || l.MaxPartialFrameBytesPerIP < 0:
		return l, fmt.Errorf("--max-partial-frame-bytes-per-connection and -per-ip must not be negative")
	case l.RequestReadTimeout == 0:
		return l, fmt.Errorf("--request-read-timeout must not be 0 (negative disables it)")
	}
	return l, nil
}
