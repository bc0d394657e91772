package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDevSecureWithKcat runs `kproxy dev --secure` and uses the kcat line
// it prints: kcat reads client.properties (SASL_SSL, SCRAM-SHA-512, the
// throwaway CA) and lists, produces and consumes through the proxy.
func TestDevSecureWithKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH: run scripts/install-clients.sh")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m, printed := runDevSecure(t, ctx, dir, regexp.MustCompile(`kcat -F (\S+) -b (\S+) -L`))
	props, addr := m[1], m[2]
	if props != filepath.Join(dir, "client.properties") {
		t.Errorf("client.properties at %s, want in the data dir %s", props, dir)
	}
	b, err := os.ReadFile(props)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-512", "sasl.username=admin", "sasl.password=", "ssl.ca.location=" + filepath.Join(dir, "ca.pem")} {
		if !strings.Contains(string(b), want) {
			t.Errorf("client.properties lacks %q", want)
		}
	}
	kcat := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-F", props, "-b", addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		res, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, res)
		}
		return string(res)
	}
	if got := kcat("", "-L"); !strings.Contains(got, "1 brokers") {
		t.Fatalf("kcat -L:\n%s", got)
	}
	kcat("hello\n", "-P", "-t", "devsecure")
	if got := kcat("", "-C", "-t", "devsecure", "-c", "1", "-e", "-o", "beginning"); !strings.Contains(got, "hello") {
		t.Fatalf("kcat -C read %q, want hello", got)
	}
	checkDevACLs(ctx, t, printed, dir, addr)
}

// checkDevACLs: on the secure listener a user other than the admin is
// denied by default, and a binding made with kproxy acls lets it read.
func checkDevACLs(ctx context.Context, t *testing.T, out, dir, addr string) {
	t.Helper()
	m := regexp.MustCompile(`etcd:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no etcd endpoint in the output:\n%s", out)
	}
	run := func(stdin string, args ...string) {
		t.Helper()
		app := newApp()
		app.Reader, app.Writer = strings.NewReader(stdin), io.Discard
		if err := app.RunContext(ctx, append([]string{"kproxy"}, args...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	run("bob-secret\n", "users", "--etcd-endpoints", m[1], "add", "bob")
	b, err := os.ReadFile(filepath.Join(dir, "client.properties"))
	if err != nil {
		t.Fatal(err)
	}
	props := regexp.MustCompile(`(?m)^sasl\.username=.*$`).ReplaceAllString(string(b), "sasl.username=bob")
	props = regexp.MustCompile(`(?m)^sasl\.password=.*$`).ReplaceAllString(props, "sasl.password=bob-secret")
	bobProps := filepath.Join(t.TempDir(), "bob.properties")
	if err := os.WriteFile(bobProps, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := func(args ...string) string {
		res, _ := exec.CommandContext(ctx, "kcat", append([]string{"-F", bobProps, "-b", addr}, args...)...).CombinedOutput()
		return string(res)
	}
	if got := bob("-L"); !strings.Contains(got, " 0 topics") {
		t.Fatalf("bob lists topics before any binding:\n%s", got)
	}
	run("", "acls", "--etcd-endpoints", m[1], "add", "--principal", "User:bob", "--topic", "devsecure", "--operation", "Read")
	var got string
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(got, "hello"); got = bob("-C", "-t", "devsecure", "-c", "1", "-e", "-o", "beginning") {
		if time.Now().After(deadline) {
			t.Fatalf("bob could not read devsecure after the binding:\n%s", got)
		}
	}
}
