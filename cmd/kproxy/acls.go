package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// aclsCommand manages ACL bindings in etcd directly: the same keys that
// CreateAcls, DescribeAcls and DeleteAcls use, for scripts that have etcd
// but no Kafka client.
func aclsCommand() *cli.Command {
	return &cli.Command{
		Name:  "acls",
		Usage: "manage Kafka ACL bindings in etcd (kafka-acls style)",
		Flags: etcdFlags(),
		Subcommands: []*cli.Command{
			{Name: "add", Usage: "add bindings: one per --operation", Flags: aclFlags(true), Action: withEtcd(runACLsAdd)},
			{Name: "delete", Usage: "delete the bindings the flags select (an unset flag selects any)", Flags: aclFlags(false), Action: withEtcd(runACLsDelete)},
			{Name: "list", Usage: "list the bindings the flags select (an unset flag selects any)", Flags: aclFlags(false), Action: withEtcd(runACLsList)},
		},
	}
}

func aclFlags(add bool) []cli.Flag {
	pattern, perm, host := "any", "any", ""
	if add {
		pattern, perm, host = "literal", "allow", "*"
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "principal", Usage: "principal, e.g. User:alice (User:* for all)", Required: add},
		&cli.StringFlag{Name: "host", Value: host, Usage: "client IP address, * for any"},
		&cli.StringSliceFlag{Name: "operation", Usage: "Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All (repeatable)", Required: add},
		&cli.StringFlag{Name: "permission", Value: perm, Usage: "allow or deny" + map[bool]string{false: " (or any)"}[add]},
		&cli.StringFlag{Name: "topic", Usage: "topic name or prefix (* for all)"},
		&cli.StringFlag{Name: "group", Usage: "group name or prefix (* for all)"},
		&cli.StringFlag{Name: "transactional-id", Usage: "transactional id or prefix (* for all)"},
		&cli.BoolFlag{Name: "cluster", Usage: "the cluster resource"},
		&cli.StringFlag{Name: "pattern", Value: pattern, Usage: "literal or prefixed" + map[bool]string{false: " (or any, match)"}[add]},
	}
}

// aclResource reads the one resource flag; ok is false when none is set.
func aclResource(c *cli.Context) (kmsg.ACLResourceType, string, bool, error) {
	var set []string
	rt, name := kmsg.ACLResourceTypeAny, ""
	for _, f := range []struct {
		flag string
		rt   kmsg.ACLResourceType
	}{{"topic", kmsg.ACLResourceTypeTopic}, {"group", kmsg.ACLResourceTypeGroup}, {"transactional-id", kmsg.ACLResourceTypeTransactionalId}} {
		if c.IsSet(f.flag) {
			set, rt, name = append(set, "--"+f.flag), f.rt, c.String(f.flag)
		}
	}
	if c.Bool("cluster") {
		set, rt, name = append(set, "--cluster"), kmsg.ACLResourceTypeCluster, authz.ClusterName
	}
	if len(set) > 1 {
		return 0, "", false, fmt.Errorf("only one of %s", strings.Join(set, ", "))
	}
	return rt, name, len(set) == 1, nil
}

func parseOps(c *cli.Context) ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, s := range c.StringSlice("operation") {
		for _, one := range strings.Split(s, ",") {
			op, err := kmsg.ParseACLOperation(strings.TrimSpace(one))
			if err != nil {
				return nil, fmt.Errorf("--operation: %w", err)
			}
			ops = append(ops, op)
		}
	}
	return ops, nil
}

func runACLsAdd(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
	rt, name, ok, err := aclResource(c)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("name a resource: --topic, --group, --transactional-id or --cluster")
	}
	pt, err := kmsg.ParseACLResourcePatternType(c.String("pattern"))
	if err != nil {
		return fmt.Errorf("--pattern: %w", err)
	}
	perm, err := kmsg.ParseACLPermissionType(c.String("permission"))
	if err != nil {
		return fmt.Errorf("--permission: %w", err)
	}
	ops, err := parseOps(c)
	if err != nil {
		return err
	}
	var bs []authz.Binding
	for _, op := range ops {
		bs = append(bs, authz.Binding{
			Pattern: authz.Pattern{Type: rt, PatternType: pt, Name: name},
			Entry:   authz.Entry{Principal: c.String("principal"), Host: c.String("host"), Operation: op, Permission: perm},
		})
	}
	if _, err := aclstore.Create(c.Context, cl, l, bs); err != nil {
		return err
	}
	return printBindings(c, bs)
}

// aclFilter reads the flags as a filter; unset flags match anything.
func aclFilter(c *cli.Context) ([]authz.Filter, error) {
	rt, name, named, err := aclResource(c)
	if err != nil {
		return nil, err
	}
	f := authz.Filter{Type: rt, Operation: kmsg.ACLOperationAny}
	if named {
		f.Name = &name
	}
	if f.PatternType, err = kmsg.ParseACLResourcePatternType(c.String("pattern")); err != nil {
		return nil, fmt.Errorf("--pattern: %w", err)
	}
	if f.Permission, err = kmsg.ParseACLPermissionType(c.String("permission")); err != nil {
		return nil, fmt.Errorf("--permission: %w", err)
	}
	for _, s := range []struct {
		flag string
		dst  **string
	}{{"principal", &f.Principal}, {"host", &f.Host}} {
		if v := c.String(s.flag); v != "" {
			*s.dst = &v
		}
	}
	ops, err := parseOps(c)
	if err != nil || len(ops) == 0 {
		return []authz.Filter{f}, err
	}
	fs := make([]authz.Filter, len(ops))
	for i, op := range ops {
		fs[i] = f
		fs[i].Operation = op
	}
	return fs, nil
}

func runACLsList(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
	fs, err := aclFilter(c)
	if err != nil {
		return err
	}
	var all []authz.Binding
	for _, f := range fs {
		bs, err := aclstore.List(c.Context, cl, l, f)
		if err != nil {
			return err
		}
		all = append(all, bs...)
	}
	return printBindings(c, all)
}

func runACLsDelete(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
	fs, err := aclFilter(c)
	if err != nil {
		return err
	}
	deleted, _, err := aclstore.Delete(c.Context, cl, l, fs)
	if err != nil {
		return err
	}
	var all []authz.Binding
	for _, d := range deleted {
		all = append(all, d...)
	}
	return printBindings(c, all)
}

func printBindings(c *cli.Context, bs []authz.Binding) error {
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE\tPATTERN\tNAME\tPRINCIPAL\tHOST\tOPERATION\tPERMISSION")
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Type, b.PatternType, b.Name, b.Principal, b.Host, b.Operation, b.Permission)
	}
	return w.Flush()
}
