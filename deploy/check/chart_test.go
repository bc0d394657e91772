package check

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

const (
	repoRoot = "../.."
	chartDir = "../helm/kproxy"
)

// kproxyBin is kproxy built from the repository root (the product module,
// not this one) by TestMain.
var kproxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kproxy-check-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kproxyBin = filepath.Join(dir, "kproxy")
	build := exec.Command("go", "build", "-o", kproxyBin, "./cmd/kproxy")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kproxy: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// serveHelp returns the flag names `kproxy serve --help` lists.
var serveHelp = sync.OnceValues(func() (map[string]bool, error) {
	out, err := exec.Command(kproxyBin, "serve", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("kproxy serve --help: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["config"] {
		return nil, fmt.Errorf("no --listen or --config in kproxy serve --help:\n%s", out)
	}
	return flags, nil
})

func render(t *testing.T, valuesFile string) (*chart.Chart, *objects) {
	t.Helper()
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(valuesFile)
		if err != nil {
			t.Fatal(err)
		}
		vals = v
	}
	ch, o, err := renderValues(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return ch, o
}

// renderValues renders the chart with vals; an error is the chart
// refusing them (helm's fail or required) or an object that does not
// decode.
func renderValues(t *testing.T, vals map[string]any) (*chart.Chart, *objects, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		t.Fatalf("chart kubeVersion %q rejects %s", ch.Metadata.KubeVersion, caps.KubeVersion)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "kp", Namespace: "kafka", IsInstall: true}, caps)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	// Strict: a template that names a value the chart does not define fails.
	out, err := engine.Engine{Strict: true}.Render(ch, rv)
	if err != nil {
		return ch, nil, fmt.Errorf("render: %w", err)
	}
	objs, err := decode(out)
	return ch, objs, err
}

// TestChartMinimal renders the least a user must give (superUsers): the
// defaults' SASL listener.
func TestChartMinimal(t *testing.T) {
	_, o := render(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	checkCommon(t, o)
	if len(o.hpas) != 1 || len(o.monitors) != 0 {
		t.Fatalf("defaults: %d HPAs, %d ServiceMonitors; want 1 and 0", len(o.hpas), len(o.monitors))
	}
	d := o.deployments[0]
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d set while the HPA scales the Deployment", *d.Spec.Replicas)
	}
	hpa := o.hpas[0]
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name ||
		len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA does not scale the Deployment on CPU: %+v", hpa.Spec)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--advertise=kp-kproxy.kafka.svc:9093") {
		t.Errorf("default advertise is not the client Service's name: %q", c.Args)
	}
	if len(d.Spec.Template.Spec.Volumes) != 1 {
		t.Errorf("volumes without TLS or SASL: %+v", d.Spec.Template.Spec.Volumes)
	}
	t.Run("config keys are serve flags", func(t *testing.T) { checkConfigKeys(t, o) })
}

func TestChartTLS(t *testing.T) {
	_, o := render(t, filepath.Join(chartDir, "ci", "tls-values.yaml"))
	checkCommon(t, o)
	if len(o.hpas) != 0 || len(o.monitors) != 1 {
		t.Fatalf("TLS values: %d HPAs, %d ServiceMonitors; want 0 and 1", len(o.hpas), len(o.monitors))
	}
	d := o.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 4 {
		t.Errorf("replicas = %v, want 4", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if !slices.Contains(c.Args, "--advertise=kafka.example.com:9093") {
		t.Errorf("args %q lack the configured advertise", c.Args)
	}
	for _, want := range []struct{ volume, secret, mount string }{
		{"tls", "kproxy-tls", "/etc/kproxy/tls"},
		{"sasl", "kproxy-sasl", "/etc/kproxy/sasl"},
	} {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == want.volume })
		if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != want.secret {
			t.Errorf("no volume %s of secret %s: %+v", want.volume, want.secret, pod.Volumes)
		}
		j := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == want.volume })
		if j < 0 || c.VolumeMounts[j].MountPath != want.mount || !c.VolumeMounts[j].ReadOnly {
			t.Errorf("volume %s not mounted read-only at %s: %+v", want.volume, want.mount, c.VolumeMounts)
		}
	}
	cfg := configOf(t, o)
	for key, want := range map[string]string{
		"tls-cert-file":        "/etc/kproxy/tls/tls.crt",
		"tls-key-file":         "/etc/kproxy/tls/tls.key",
		"tls-client-ca-file":   "/etc/kproxy/tls/ca.crt",
		"tls-client-auth":      "required",
		"sasl-mechanisms":      "SCRAM-SHA-512,OAUTHBEARER",
		"oauth-jwks-file":      "/etc/kproxy/sasl/jwks.json",
		"listeners":            "SASL_SSL://0.0.0.0:9093",
		"advertised-listeners": "SASL_SSL://kafka.example.com:9093",
		"authorizer":           "deny-by-default",
		"super-users":          "User:admin,User:CN=ops",
	} {
		if got := fmt.Sprint(cfg[key]); got != want {
			t.Errorf("config %s = %q, want %q", key, got, want)
		}
	}
	svc := serviceNamed(t, o, "kp-kproxy")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9093 {
		t.Errorf("client Service %+v", svc.Spec)
	}
	sm := o.monitors[0]
	metrics := serviceNamed(t, o, "kp-kproxy-metrics")
	for k, v := range sm.Spec.Selector.MatchLabels {
		if metrics.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has %q", k, v, metrics.Labels[k])
		}
	}
	if svc.Labels["app.kubernetes.io/component"] == "metrics" {
		t.Errorf("the ServiceMonitor would also scrape the client Service")
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != metrics.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %+v", sm)
	}
	t.Run("config keys are serve flags", func(t *testing.T) { checkConfigKeys(t, o) })
}

// checkCommon holds for every rendering: one Deployment whose pods probe
// the admin port, run as non-root, read the config the ConfigMap holds,
// and take only flags kproxy serve has; Services and the PDB select them.
func checkCommon(t *testing.T, o *objects) {
	t.Helper()
	if len(o.deployments) != 1 || len(o.configMaps) != 1 || len(o.services) < 2 || len(o.pdbs) != 1 {
		t.Fatalf("%d Deployments, %d ConfigMaps, %d Services, %d PDBs; want 1, 1, 2 or 3, 1",
			len(o.deployments), len(o.configMaps), len(o.services), len(o.pdbs))
	}
	d := o.deployments[0]
	pod := d.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s probe %+v, want GET %s on the admin port", name, p, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	if sc := pod.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod may run as root: %+v", sc)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
	flags, err := serveHelp()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("container args %q do not run kproxy serve", c.Args)
	}
	seen := map[string]string{}
	for _, a := range c.Args[1:] {
		name, val, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !flags[name] {
			t.Errorf("container arg %q is not a flag of kproxy serve", a)
		}
		seen[name] = val
	}
	for _, f := range []string{"config", "advertise", "node-id", "listen", "admin"} {
		if seen[f] == "" {
			t.Errorf("container args %q lack --%s", c.Args, f)
		}
	}
	// The config flag names the file the ConfigMap is mounted as.
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == seen["config"] })
	if i < 0 {
		t.Fatalf("--config=%s is not a mount: %+v", seen["config"], c.VolumeMounts)
	}
	j := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	if j < 0 || pod.Spec.Volumes[j].ConfigMap == nil || pod.Spec.Volumes[j].ConfigMap.Name != o.configMaps[0].Name ||
		o.configMaps[0].Data[c.VolumeMounts[i].SubPath] == "" {
		t.Errorf("--config=%s is not the ConfigMap's config file", seen["config"])
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, s := range o.services {
		for k, v := range s.Spec.Selector {
			if pod.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, pods have %q", s.Name, k, v, pod.Labels[k])
			}
		}
		for _, p := range s.Spec.Ports {
			if !ports[p.TargetPort.String()] {
				t.Errorf("Service %s targets port %q the container does not name", s.Name, p.TargetPort.String())
			}
		}
	}
	pdb := o.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector == nil {
		t.Errorf("PDB %+v", pdb.Spec)
	} else {
		for k, v := range pdb.Spec.Selector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("PDB selects %s=%s, pods have %q", k, v, pod.Labels[k])
			}
		}
	}
}

func configOf(t *testing.T, o *objects) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(o.configMaps[0].Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	return cfg
}

// checkConfigKeys: every key of the rendered config file is a flag of
// kproxy serve, as every key of config.example.yaml is, with TLS and SASL
// settings or without, and is documented in config.example.yaml.
func checkConfigKeys(t *testing.T, o *objects) {
	t.Helper()
	flags, err := serveHelp()
	if err != nil {
		t.Fatal(err)
	}
	for key := range configOf(t, o) {
		if !flags[key] {
			t.Errorf("config key %q is not a flag of kproxy serve", key)
		}
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var example map[string]any
	if err := yaml.Unmarshal(b, &example); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	for key := range configOf(t, o) {
		if _, ok := example[key]; !ok {
			t.Errorf("config key %q is not in config.example.yaml", key)
		}
	}
}

func serviceNamed(t *testing.T, o *objects, name string) *corev1.Service {
	t.Helper()
	for _, s := range o.services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}
