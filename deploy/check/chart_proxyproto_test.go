package check

import (
	"fmt"
	"strings"
	"testing"
)

// TestChartProxyProtocol: proxyProtocol.from turns the PROXY protocol on
// for the secure listener only, with the balancer's CIDRs; it needs that
// listener, and the chart owns the flags.
func TestChartProxyProtocol(t *testing.T) {
	vals := map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true,
		"proxyProtocol": map[string]any{"from": []any{"10.0.0.0/16", "fd00::/8"}},
		"listeners":     map[string]any{"plaintext": map[string]any{"enabled": true}}}
	_, o, err := renderValues(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	cfg := configOf(t, o)
	if got, want := fmt.Sprint(cfg["listener-proxy-protocol-from"]), "SASL_PLAINTEXT:10.0.0.0/16,SASL_PLAINTEXT:fd00::/8"; got != want {
		t.Errorf("listener-proxy-protocol-from = %q, want %q", got, want)
	}
	if _, ok := cfg["proxy-protocol-from"]; ok {
		t.Errorf("proxy-protocol-from set: it would cover the PLAINTEXT listener too")
	}
	t.Run("config keys are serve flags", func(t *testing.T) { checkConfigKeys(t, o) })
	t.Run("the rendered config serves", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs kproxy")
		}
		_, o, err := renderValues(t, map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true,
			"proxyProtocol": map[string]any{"from": []any{"10.0.0.0/16"}}})
		if err != nil {
			t.Fatal(err)
		}
		serveRendered(t, o) // one listener: what serveRendered binds
	})

	for _, tc := range []struct {
		name, why string
		vals      map[string]any
	}{
		{"without the secure listener", "proxyProtocol.from needs the secure listener", map[string]any{
			"sasl": map[string]any{"enabled": false}, "listeners": map[string]any{"plaintext": map[string]any{"enabled": true}},
			"proxyProtocol": map[string]any{"from": []any{"10.0.0.0/16"}}}},
		{"set in config", "config.proxy-protocol-from is set by the chart", map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true,
			"config": map[string]any{"proxy-protocol-from": "10.0.0.0/16"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := renderValues(t, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("rendered (err %v); want a failure saying %q", err, tc.why)
			}
		})
	}
}
