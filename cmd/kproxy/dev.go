package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/devcluster"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run embedded etcd, stub brokers and a proxy in one process (a local cluster)",
		Flags: append([]cli.Flag{
			stringFlag("listen", "127.0.0.1:9092", "proxy address: the bootstrap address for clients"),
			stringFlag("admin", "127.0.0.1:9644", "proxy admin HTTP address"),
			intFlag("brokers", 3, "number of stub brokers"),
			intFlag("broker-base-port", 0, "if set, brokers listen on 127.0.0.1:<base+i>; otherwise on free ports"),
			stringFlag("data-dir", "", "keep etcd data and segments here (default: a temporary folder removed on exit)"),
			durationFlag("lease-ttl", 10*time.Second, "brokers' etcd lease TTL"),
			intFlag("default-partitions", 3, "partitions of an auto-created topic"),
			boolFlag("auto-create-topics", true, "create unknown topics on first use"),
		}, logFlags()...),
		Action: runDev,
	}
}

func runDev(c *cli.Context) error {
	logger, err := newLogger(c)
	if err != nil {
		return err
	}
	n := c.Int("brokers")
	var brokerListen []string
	if base := c.Int("broker-base-port"); base > 0 {
		for i := 0; i < n; i++ {
			brokerListen = append(brokerListen, fmt.Sprintf("127.0.0.1:%d", base+i))
		}
	}
	cl, err := devcluster.Start(c.Context, devcluster.Config{
		Brokers:           n,
		Proxies:           1,
		ProxyListen:       []string{c.String("listen")},
		AdminListen:       []string{c.String("admin")},
		BrokerListen:      brokerListen,
		LeaseTTL:          c.Duration("lease-ttl"),
		DefaultPartitions: int32(c.Int("default-partitions")),
		AutoCreateTopics:  c.Bool("auto-create-topics"),
		DataDir:           c.String("data-dir"),
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Fprintf(c.App.Writer, "kproxy dev cluster is up\n  bootstrap: %s\n  admin:     http://%s\n  etcd:      %s\n",
		cl.ProxyAddrs()[0], cl.AdminAddrs()[0], cl.EtcdEndpoint)
	for _, id := range cl.BrokerIDs() {
		fmt.Fprintf(c.App.Writer, "  broker %d:  %s\n", id, cl.BrokerAddr(id))
	}
	fmt.Fprintf(c.App.Writer, "try: kcat -b %s -L    (Ctrl-C stops everything)\n", cl.ProxyAddrs()[0])
	err = cl.Wait(c.Context)
	fmt.Fprintln(c.App.Writer, "stopping")
	return err
}
