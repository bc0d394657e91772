package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/proxy/listener"
)

// TestProxyProtocolFlags: --proxy-protocol-from covers every listener
// (--listen's one included), --listener-proxy-protocol-from replaces it for
// the listeners it names, and bad entries stop serve.
func TestProxyProtocolFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string // listener: its sources
		err  string
	}{
		{"off", nil, nil, ""},
		{"--listen's listener", []string{"--proxy-protocol-from", "10.0.0.0/16,10.9.9.9"},
			map[string]string{"PLAINTEXT": "[10.0.0.0/16 10.9.9.9/32]"}, ""},
		{"every listener, one of its own", []string{"--listeners", "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093",
			"--proxy-protocol-from", "10.0.0.0/16", "--listener-proxy-protocol-from", "sasl_ssl:fd00::/8,SASL_SSL:10.1.0.0/16"},
			map[string]string{"PLAINTEXT": "[10.0.0.0/16]", "SASL_SSL": "[fd00::/8 10.1.0.0/16]"}, ""},
		{"a bad CIDR", []string{"--proxy-protocol-from", "10.0.0.0/33"}, nil, "--proxy-protocol-from"},
		{"no name", []string{"--listener-proxy-protocol-from", "10.0.0.0/16"}, nil, "want NAME:CIDR"},
		{"an unknown listener", []string{"--listener-proxy-protocol-from", "EXTERNAL:10.0.0.0/16"}, nil, "no listener named EXTERNAL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ls []listener.Listener
			var err error
			cmd := serveCommand()
			cmd.Action = func(c *cli.Context) error { ls, err = listenersFromFlags(c); return nil }
			app := &cli.App{Name: "kproxy", Commands: []*cli.Command{cmd}}
			if runErr := app.Run(append([]string{"kproxy", "serve"}, tc.args...)); runErr != nil {
				t.Fatal(runErr)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, l := range ls {
				if l.ProxyProtocol.On() {
					got[l.Name] = fmt.Sprint(l.ProxyProtocol.From)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) && (len(got) > 0 || len(tc.want) > 0) {
				t.Fatalf("sources %v, want %v", got, tc.want)
			}
		})
	}
}
