package check

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestChartInsecureCombinations renders each combination of values that
// would open the cluster: each fails to render, with a message that says
// what to set, or comes out in the secure shape (the plaintext listener
// only on a ClusterIP Service; deny-by-default with super users whenever
// a listener authenticates).
func TestChartInsecureCombinations(t *testing.T) {
	// SASL_PLAINTEXT on the LoadBalancer, asked for by name: the other
	// checks' starting point.
	sasl := func(extra map[string]any) map[string]any {
		v := map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true}
		for k, x := range extra {
			v[k] = x
		}
		return v
	}
	mtls := map[string]any{"enabled": true, "secretName": "kproxy-tls", "clientAuth": "required"}
	refused := []struct {
		name, why string
		vals      map[string]any
	}{
		{"SASL without superUsers", "superUsers is required", map[string]any{"allowPlaintextSASLOnLoadBalancer": true}},
		{"SASL_PLAINTEXT on a LoadBalancer (the defaults)", "allowPlaintextSASLOnLoadBalancer=true",
			map[string]any{"superUsers": []any{"User:admin"}}},
		{"SASL_PLAINTEXT on a NodePort", "on a NodePort Service",
			map[string]any{"superUsers": []any{"User:admin"}, "service": map[string]any{"type": "NodePort"}}},
		{"sasl.config authorizer allow-all", "sasl.config.authorizer: sasl.config takes only",
			sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{"authorizer": "allow-all"}}})},
		{"sasl.config dry-run authorizer", "sasl.config.authorizer-dry-run: sasl.config takes only",
			sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{"authorizer-dry-run": true}}})},
		{"sasl.config super users", "sasl.config.super-users: sasl.config takes only",
			sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{"super-users": "User:ANONYMOUS"}}})},
		{"sasl.config listeners", "sasl.config.listeners: sasl.config takes only",
			sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{"listeners": "PLAINTEXT://0.0.0.0:9093"}}})},
		{"sasl.config mechanisms", "sasl.config.sasl-mechanisms: sasl.config takes only",
			sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{"sasl-mechanisms": "PLAIN"}}})},
		{"sasl.config and config both", "sasl.config.sasl-max-session is also in config",
			sasl(map[string]any{"config": map[string]any{"sasl-max-session": "1h"}, "sasl": map[string]any{"config": map[string]any{"sasl-max-session": "2h"}}})},
		{"mTLS without superUsers", "superUsers is required", map[string]any{"sasl": map[string]any{"enabled": false}, "tls": mtls}},
		{"no listener at all", "no listener", map[string]any{"sasl": map[string]any{"enabled": false}}},
		{"TLS that authenticates nobody", "authenticates nobody", sasl(map[string]any{"sasl": map[string]any{"enabled": false},
			"tls": map[string]any{"enabled": true, "secretName": "kproxy-tls", "clientAuth": "none"}})},
		{"SASL with authorizer allow-all", "config.authorizer is set by the chart", sasl(map[string]any{"config": map[string]any{"authorizer": "allow-all"}})},
		{"SASL with authorizer acl", "config.authorizer is set by the chart", sasl(map[string]any{"config": map[string]any{"authorizer": "acl"}})},
		{"SASL with a dry-run authorizer", "config.authorizer-dry-run is set by the chart", sasl(map[string]any{"config": map[string]any{"authorizer-dry-run": true}})},
		{"super users in config", "config.super-users is set by the chart", sasl(map[string]any{"config": map[string]any{"super-users": "User:ANONYMOUS"}})},
		{"NetworkPolicy without selectors", "networkPolicy.enabled needs", sasl(map[string]any{"networkPolicy": map[string]any{"enabled": true}})},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := renderValues(t, tt.vals)
			if err == nil || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("rendered (err %v); want a failure saying %q", err, tt.why)
			}
		})
	}

	secure := []struct {
		name      string
		vals      map[string]any
		plaintext bool
		authz     bool // deny-by-default with super users
	}{
		{"SASL_PLAINTEXT on a LoadBalancer, asked for", sasl(nil), false, true},
		{"SASL_PLAINTEXT on a ClusterIP", map[string]any{"superUsers": []any{"User:admin"}, "service": map[string]any{"type": "ClusterIP"}}, false, true},
		{"SASL_SSL on a LoadBalancer", map[string]any{"superUsers": []any{"User:admin"},
			"tls": map[string]any{"enabled": true, "secretName": "kproxy-tls"}}, false, true},
		{"SASL settings in sasl.config", sasl(map[string]any{"sasl": map[string]any{"config": map[string]any{
			"sasl-secret-file": "/etc/kproxy/sasl/secret", "oauth-issuer": "https://issuer.example.com"}}}), false, true},
		{"SASL and plaintext on a LoadBalancer", sasl(map[string]any{"listeners": map[string]any{"plaintext": map[string]any{"enabled": true}},
			"service": map[string]any{"type": "LoadBalancer"}}), true, true},
		{"mTLS and plaintext", sasl(map[string]any{"sasl": map[string]any{"enabled": false}, "tls": mtls,
			"listeners": map[string]any{"plaintext": map[string]any{"enabled": true}}}), true, true},
		{"plaintext only", map[string]any{"sasl": map[string]any{"enabled": false}, "service": map[string]any{"type": "LoadBalancer"},
			"listeners": map[string]any{"plaintext": map[string]any{"enabled": true}}}, true, false},
	}
	for _, tt := range secure {
		t.Run(tt.name, func(t *testing.T) {
			_, o, err := renderValues(t, tt.vals)
			if err != nil {
				t.Fatal(err)
			}
			checkCommon(t, o)
			checkSecureShape(t, o, tt.plaintext, tt.authz)
		})
	}
}

// checkSecureShape: no Service but the plaintext one (a ClusterIP) reaches
// the plaintext port, which is advertised by that Service's name; with
// authentication on, the authorizer is deny-by-default with super users.
func checkSecureShape(t *testing.T, o *objects, plaintext, authz bool) {
	t.Helper()
	c := o.deployments[0].Spec.Template.Spec.Containers[0]
	hasPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "kafka" })
	if hasPort != plaintext {
		t.Errorf("container plaintext port %v, want %v", hasPort, plaintext)
	}
	var plainSvc *corev1.Service
	for _, s := range o.services {
		for _, p := range s.Spec.Ports {
			if p.TargetPort.String() != "kafka" {
				continue
			}
			if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Name != "kp-kproxy-plaintext" {
				t.Errorf("Service %s (%s) publishes the plaintext listener", s.Name, s.Spec.Type)
			}
			plainSvc = s
		}
	}
	if (plainSvc != nil) != plaintext {
		t.Errorf("plaintext Service %v, want %v", plainSvc != nil, plaintext)
	}
	cfg := configOf(t, o)
	ls, _ := cfg["listeners"].(string)
	adv, _ := cfg["advertised-listeners"].(string)
	if ls != "" && strings.Contains(ls, "PLAINTEXT://") != plaintext && !strings.Contains(ls, "SASL_PLAINTEXT://") {
		t.Errorf("listeners %q, plaintext %v", ls, plaintext)
	}
	if plaintext && ls != "" && !strings.Contains(adv, "PLAINTEXT://kp-kproxy-plaintext.kafka.svc:9092") {
		t.Errorf("plaintext advertised %q, want the ClusterIP Service's name", adv)
	}
	if authz {
		if cfg["authorizer"] != "deny-by-default" || cfg["super-users"] == nil || cfg["super-users"] == "" {
			t.Errorf("authenticated listeners with authorizer %v, super users %v; want deny-by-default and super users", cfg["authorizer"], cfg["super-users"])
		}
	}
	for _, s := range o.services {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.TargetPort.String() == "kafka" }) {
			t.Errorf("LoadBalancer %s publishes the plaintext listener", s.Name)
		}
	}
}

// TestChartNetworkPolicy: with networkPolicy on, the brokers admit only
// the proxies, and etcd only the proxies, the brokers and its members.
func TestChartNetworkPolicy(t *testing.T) {
	brokers := map[string]any{"app.kubernetes.io/name": "kproxy-broker"}
	etcd := map[string]any{"app.kubernetes.io/name": "etcd"}
	_, o, err := renderValues(t, map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true, "networkPolicy": map[string]any{
		"enabled": true, "brokers": map[string]any{"podSelector": brokers}, "etcd": map[string]any{"podSelector": etcd}}})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, o)
	if len(o.policies) != 3 {
		t.Fatalf("%d NetworkPolicies, want 3 (brokers, etcd, proxies)", len(o.policies))
	}
	pods := o.deployments[0].Spec.Template.Labels
	proxies := func(sel map[string]string) bool {
		for k, v := range sel {
			if pods[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for _, p := range o.policies {
		if proxies(p.Spec.PodSelector.MatchLabels) {
			continue // TestChartNetworkPolicyAdminPort
		}
		target := p.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]
		if len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != "Ingress" || len(p.Spec.Ingress) == 0 {
			t.Errorf("%s: not an ingress policy: %+v", p.Name, p.Spec)
		}
		sawProxies := false
		for _, in := range p.Spec.Ingress {
			if len(in.From) == 0 {
				t.Errorf("%s admits everyone", p.Name)
			}
			for _, f := range in.From {
				if f.PodSelector == nil || f.NamespaceSelector != nil || f.IPBlock != nil {
					t.Errorf("%s admits %+v", p.Name, f)
					continue
				}
				who := f.PodSelector.MatchLabels["app.kubernetes.io/name"]
				switch {
				case proxies(f.PodSelector.MatchLabels):
					sawProxies = true
				case target == "etcd" && (who == "kproxy-broker" || who == "etcd"):
				default:
					t.Errorf("%s admits pods %v", p.Name, f.PodSelector.MatchLabels)
				}
			}
		}
		if !sawProxies {
			t.Errorf("%s does not admit the proxies", p.Name)
		}
	}
}

// TestChartNetworkPolicyAdminPort: the proxies' policy admits everyone to
// the Kafka listeners that are on, and only networkPolicy.admin.from to the
// admin port (nobody when it is empty).
func TestChartNetworkPolicyAdminPort(t *testing.T) {
	monitoring := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}
	for _, c := range []struct {
		name      string
		from      []any
		plaintext bool
		kafka     []int32 // ports open to everyone
	}{
		{"no admin peers", nil, false, []int32{9093}},
		{"Prometheus's namespace", []any{monitoring}, false, []int32{9093}},
		{"plaintext listener on", []any{monitoring}, true, []int32{9092, 9093}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, o, err := renderValues(t, map[string]any{"superUsers": []any{"User:admin"}, "allowPlaintextSASLOnLoadBalancer": true,
				"listeners": map[string]any{"plaintext": map[string]any{"enabled": c.plaintext}},
				"networkPolicy": map[string]any{"enabled": true,
					"brokers": map[string]any{"podSelector": map[string]any{"app": "b"}},
					"etcd":    map[string]any{"podSelector": map[string]any{"app": "e"}},
					"admin":   map[string]any{"from": c.from}}})
			if err != nil {
				t.Fatal(err)
			}
			pods := o.deployments[0].Spec.Template.Labels
			var rules []networkingv1.NetworkPolicyIngressRule
			for _, p := range o.policies {
				if sel := p.Spec.PodSelector.MatchLabels; len(sel) > 0 && sel["app.kubernetes.io/name"] == pods["app.kubernetes.io/name"] && sel["app.kubernetes.io/instance"] == pods["app.kubernetes.io/instance"] {
					rules = p.Spec.Ingress
				}
			}
			if rules == nil {
				t.Fatal("no NetworkPolicy selects the proxies")
			}
			var open []int32
			adminFrom := 0
			for _, r := range rules {
				for _, pt := range r.Ports {
					port := pt.Port.IntVal
					switch {
					case port == 9644 && len(r.From) == 0:
						t.Errorf("the admin port is open to everyone: %+v", r)
					case port == 9644:
						adminFrom += len(r.From)
					case len(r.From) == 0:
						open = append(open, port)
					default:
						t.Errorf("Kafka port %d restricted to %+v", port, r.From)
					}
				}
			}
			slices.Sort(open)
			if !slices.Equal(open, c.kafka) {
				t.Errorf("ports open to everyone %v, want %v", open, c.kafka)
			}
			if adminFrom != len(c.from) {
				t.Errorf("admin port admits %d peers, want %d", adminFrom, len(c.from))
			}
		})
	}
}

// TestChartServiceMonitorNeedsAdminPeers: a ServiceMonitor behind the
// proxies' policy with no admin peers could never scrape: refused, with a
// message that says what to set.
func TestChartServiceMonitorNeedsAdminPeers(t *testing.T) {
	_, _, err := renderValues(t, map[string]any{"superUsers": []any{"User:admin"},
		"serviceMonitor": map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true,
			"brokers": map[string]any{"podSelector": map[string]any{"app": "b"}},
			"etcd":    map[string]any{"podSelector": map[string]any{"app": "e"}}}})
	if err == nil || !strings.Contains(err.Error(), "networkPolicy.admin.from") {
		t.Fatalf("rendered a ServiceMonitor that the admin policy blocks: %v", err)
	}
}

// TestChartSuperUserSecretNeedsAuthentication: super user credentials
// without a listener that authenticates anyone are refused.
func TestChartSuperUserSecretNeedsAuthentication(t *testing.T) {
	_, _, err := renderValues(t, map[string]any{"superUserSecret": "kproxy-admin",
		"sasl":      map[string]any{"enabled": false},
		"listeners": map[string]any{"plaintext": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "superUserSecret needs") {
		t.Fatalf("rendered superUserSecret with no authenticating listener: %v", err)
	}
}
