package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
)

func TestACLsCommand(t *testing.T) {
	srv, _ := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		app := newApp()
		app.Writer = &out
		full := append([]string{"kproxy", "acls", "--etcd-endpoints", srv.Endpoint}, args...)
		if err := app.RunContext(ctx, full); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	run("add", "--principal", "User:alice", "--topic", "a-", "--pattern", "prefixed", "--operation", "Write,Read")
	run("add", "--principal", "User:alice", "--topic", "a-secret", "--permission", "deny", "--operation", "All")
	run("add", "--principal", "User:bob", "--group", "g-bob", "--operation", "read")
	lines := func(s string) int { return strings.Count(s, "\n") - 1 } // minus the header
	if n := lines(run("list")); n != 4 {
		t.Fatalf("list: %d bindings, want 4", n)
	}
	if out := run("list", "--principal", "User:bob"); lines(out) != 1 || !strings.Contains(out, "g-bob") {
		t.Fatalf("list bob:\n%s", out)
	}
	if n := lines(run("list", "--topic", "a-secret", "--pattern", "match")); n != 3 {
		t.Fatalf("list matching a-secret: %d, want 3", n)
	}
	if n := lines(run("delete", "--principal", "User:alice", "--permission", "deny")); n != 1 {
		t.Fatalf("delete: %d, want 1", n)
	}
	if n := lines(run("list")); n != 3 {
		t.Fatalf("after delete: %d bindings, want 3", n)
	}
}
