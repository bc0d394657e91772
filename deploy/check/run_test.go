package check

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRenderedConfigServes runs the container's command line, with the
// rendered config file, against a local etcd (kproxy's own `kproxy etcd`):
// only the addresses are changed to 127.0.0.1. The proxy must load the file
// (every key known, every value of the right type), reach etcd and serve
// its probes.
func TestRenderedConfigServes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kproxy")
	}
	_, o := render(t, filepath.Join(chartDir, "ci", "minimal-values.yaml"))
	serveRendered(t, o)
}

// TestRenderedSuperUserCredentials: with superUserSecret, the pod mounts
// the Secret's password where the rendered config points, and a proxy
// started with it gives the first super user SCRAM credentials in etcd.
func TestRenderedSuperUserCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kproxy")
	}
	_, o := render(t, filepath.Join(chartDir, "ci", "superuser-values.yaml"))
	const path = "/etc/kproxy/super-user/password"
	if got := configOf(t, o)["super-user-credentials-file"]; got != path {
		t.Fatalf("config super-user-credentials-file = %v, want %s", got, path)
	}
	spec := o.deployments[0].Spec.Template.Spec
	mounted := false
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.Name == "super-user" && m.MountPath == filepath.Dir(path) && m.ReadOnly {
			mounted = true
		}
	}
	secret := ""
	for _, v := range spec.Volumes {
		if v.Name == "super-user" && v.Secret != nil && len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "password" && v.Secret.Items[0].Path == filepath.Base(path) {
			secret = v.Secret.SecretName
		}
	}
	if !mounted || secret != "kproxy-admin" {
		t.Fatalf("password not mounted at %s from Secret kproxy-admin (mounted %v, secret %q)", path, mounted, secret)
	}
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret-of-the-admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	etcd := serveRendered(t, o, "--super-user-credentials-file="+pw)
	out, err := exec.Command(kproxyBin, "users", "--etcd-endpoints", "http://"+etcd, "list").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "admin") {
		t.Fatalf("kproxy users list: %v\n%s\nwant the super user admin", err, out)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Fatal("kproxy users list shows the password")
	}
}

// serveRendered runs the container's command line of o, with its rendered
// config file, until the proxy is up; extra flags outrank the file. It
// returns etcd's address.
func serveRendered(t *testing.T, o *objects, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(o.configMaps[0].Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	etcdAddr := freeAddr(t)
	_ = start(t, kproxyBin, "etcd", "--listen-client", etcdAddr, "--data-dir", filepath.Join(dir, "etcd"))
	waitTCP(t, etcdAddr)

	admin := freeAddr(t)
	var args []string
	for _, a := range o.deployments[0].Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--config":
			a = "--config=" + cfgFile
		case "--listen":
			a = "--listen=" + freeAddr(t)
		case "--admin":
			a = "--admin=" + admin
		}
		args = append(args, a)
	}
	// A flag outranks the file: only the addresses are local.
	args = append(args, "--etcd-endpoints=http://"+etcdAddr)
	args = append(args, extra...)
	if ls, ok := configOf(t, o)["listeners"].(string); ok {
		proto, _, _ := strings.Cut(ls, "://")
		if strings.Contains(ls, ",") {
			t.Fatalf("listeners %q: the test binds one", ls)
		}
		local := proto + "://" + freeAddr(t)
		args = append(args, "--listeners="+local, "--advertised-listeners="+local)
	}
	exited := start(t, kproxyBin, args...)

	deadline := time.Now().Add(30 * time.Second)
	for {
		body, code := get("http://" + admin + "/readyz")
		// No brokers: not ready, but the routing watch synced from etcd.
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"synced": true`) {
			break
		}
		select {
		case <-exited:
			t.Fatal("kproxy with the rendered config exited")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kproxy with the rendered config: /readyz = %d %s after 30s", code, body)
		}
	}
	if body, code := get("http://" + admin + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	return etcdAddr
}

// start runs a process until the test ends (interrupted, then killed after
// 10s); its output goes to the test log if the test fails. The channel is
// closed when the process exits.
func start(t *testing.T, bin string, args ...string) <-chan struct{} {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), out.String())
		}
	})
	return done
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitTCP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 20s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(url string) (string, int) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}
