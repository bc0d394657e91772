package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/credstore"
)

// usersCommand manages SCRAM credentials in etcd directly (the same store
// DescribeUserScramCredentials and AlterUserScramCredentials use).
func usersCommand() *cli.Command {
	return &cli.Command{
		Name:  "users",
		Usage: "manage the SCRAM users of SASL listeners, in etcd",
		Flags: etcdFlags(),
		Subcommands: []*cli.Command{
			{
				Name: "add", Usage: "add or change a user; the password is read from standard input (one line)", ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "mechanism", Value: "all", Usage: "SCRAM-SHA-256, SCRAM-SHA-512 or all"},
					&cli.IntFlag{Name: "iterations", Value: credstore.DefaultIterations, Usage: "PBKDF2 iterations (4096 to 16384)"},
				},
				Action: withEtcd(func(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
					name, err := oneArg(c)
					if err != nil {
						return err
					}
					pass, err := readPassword(c.App.Reader)
					if err != nil {
						return err
					}
					mechs, err := mechanismsFlag(c.String("mechanism"))
					if err != nil {
						return err
					}
					if err := addUser(c.Context, cl, l, name, pass, mechs, c.Int("iterations")); err != nil {
						return err
					}
					fmt.Fprintf(c.App.Writer, "user %s: %s\n", name, strings.Join(mechs, ", "))
					return nil
				}),
			},
			{
				Name: "delete", Usage: "delete a user's credentials", ArgsUsage: "NAME",
				Flags: []cli.Flag{&cli.StringFlag{Name: "mechanism", Value: "all", Usage: "SCRAM-SHA-256, SCRAM-SHA-512 or all"}},
				Action: withEtcd(func(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
					name, err := oneArg(c)
					if err != nil {
						return err
					}
					mech := c.String("mechanism")
					if mech == "all" {
						mech = ""
					}
					ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
					defer cancel()
					existed, _, err := credstore.Delete(ctx, cl, l, name, mech)
					if err != nil {
						return err
					}
					if !existed {
						return fmt.Errorf("user %s has no such credentials", name)
					}
					fmt.Fprintf(c.App.Writer, "deleted %s\n", name)
					return nil
				}),
			},
			{
				Name: "list", Usage: "list users and their mechanisms",
				Action: withEtcd(func(c *cli.Context, cl *clientv3.Client, l layout.Layout) error {
					ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
					defer cancel()
					users, err := credstore.List(ctx, cl, l)
					if err != nil {
						return err
					}
					tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
					for _, u := range users {
						for _, cr := range u.Credentials {
							fmt.Fprintf(tw, "%s\t%s\t%d\n", u.Name, cr.Mechanism, cr.Iterations)
						}
					}
					return tw.Flush()
				}),
			},
		},
	}
}

func oneArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 || c.Args().First() == "" {
		return "", errors.New("want exactly one user NAME")
	}
	return c.Args().First(), nil
}

func mechanismsFlag(s string) ([]string, error) {
	if s == "all" {
		return credstore.Mechanisms, nil
	}
	for _, m := range credstore.Mechanisms {
		if s == m {
			return []string{m}, nil
		}
	}
	return nil, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or all", s)
}

// readPassword reads one line; the password is never a flag (flags show in
// process lists and shell history).
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from standard input: %w", err)
	}
	pass := strings.TrimRight(line, "\r\n")
	if pass == "" {
		return "", errors.New("empty password on standard input")
	}
	return pass, nil
}

func addUser(ctx context.Context, cl *clientv3.Client, l layout.Layout, name, pass string, mechs []string, iterations int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := credstore.PutPassword(ctx, cl, l, name, pass, mechs, iterations)
	return err
}

// bootstrapSuperUser gives the first super user the password in file
// unless the user already has credentials (it never overwrites them).
func bootstrapSuperUser(ctx context.Context, cl *clientv3.Client, l layout.Layout, name, file string) (bool, error) {
	users, err := credstore.List(ctx, cl, l)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		if u.Name == name {
			return false, nil
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return false, fmt.Errorf("super user credentials: %w", err)
	}
	defer f.Close()
	pass, err := readPassword(f)
	if err != nil {
		return false, fmt.Errorf("super user credentials file %s: %w", file, err)
	}
	return true, addUser(ctx, cl, l, name, pass, credstore.Mechanisms, credstore.DefaultIterations)
}
