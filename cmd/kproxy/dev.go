package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/principal"
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
			boolFlag("secure", false, "also serve SASL_SSL (SCRAM) with a throwaway CA and an admin user (a super user); ACLs are enforced on every listener, deny by default, and the plaintext listener's clients (User:ANONYMOUS) may only produce and consume (in consumer groups named anonymous-*); writes ca.pem and client.properties into the data dir"),
			stringFlag("secure-listen", "127.0.0.1:9093", "SASL_SSL address with --secure"),
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
	var secure *devSecure
	if c.Bool("secure") {
		if secure, err = newDevSecure(c.String("data-dir"), c.String("secure-listen")); err != nil {
			return err
		}
		defer secure.cleanup()
	}
	dcfg := devcluster.Config{
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
	}
	if secure != nil {
		dcfg.ProxyConfig = secure.configure
	}
	cl, err := devcluster.Start(c.Context, dcfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	if secure != nil {
		if err := secure.start(c.Context, cl); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.App.Writer, "kproxy dev cluster is up\n  bootstrap: %s\n  admin:     http://%s\n  etcd:      %s\n",
		cl.ProxyAddrs()[0], cl.AdminAddrs()[0], cl.EtcdEndpoint)
	for _, id := range cl.BrokerIDs() {
		fmt.Fprintf(c.App.Writer, "  broker %d:  %s\n", id, cl.BrokerAddr(id))
	}
	fmt.Fprintf(c.App.Writer, "try: kcat -b %s -L    (Ctrl-C stops everything)\n", cl.ProxyAddrs()[0])
	if secure != nil {
		fmt.Fprintf(c.App.Writer, "  SASL_SSL:  %s (user %s, password in %s)\n", cl.Proxy(0).ListenerAddr(string(listener.SASLSSL)), devAdmin, filepath.Join(secure.dir, "client.properties"))
		fmt.Fprintf(c.App.Writer, "kcat -F %s -b %s -L\n", filepath.Join(secure.dir, "client.properties"), cl.Proxy(0).ListenerAddr(string(listener.SASLSSL)))
		fmt.Fprintf(c.App.Writer, "  ACLs: enforced on every listener, deny by default; User:%s is a super user (kafka-acls, kadm or kproxy acls --etcd-endpoints %s)\n", devAdmin, cl.EtcdEndpoint)
		fmt.Fprintf(c.App.Writer, "  PLAINTEXT: %s may produce and consume (any topic and transactional id; consumer groups named %s*), nothing else: create topics and manage ACLs, quotas and users as %s\n", principal.Anonymous, devAnonymousGroupPrefix, devAdmin)
	}
	err = cl.Wait(c.Context)
	fmt.Fprintln(c.App.Writer, "stopping")
	return err
}
