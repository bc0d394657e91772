package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/proxy/quota"
	"github.com/kproxy/kproxy/proxy/security/principal"
)

// TestQuotasFollowPrincipal: a connection's quotas are its principal's, and
// a table change or a re-authentication takes effect on its next request.
func TestQuotasFollowPrincipal(t *testing.T) {
	q, err := quota.New(quota.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var alice, dflt quota.Limits
	alice.Value[quota.ProducerByteRate], alice.Has[quota.ProducerByteRate] = 100, true
	dflt.Value[quota.ProducerByteRate], dflt.Has[quota.ProducerByteRate] = 7, true
	c := &clientConn{info: apis.NewConnInfo("PLAINTEXT", "h", 1)}

	if m := c.quotas(q, "app")[quota.ProducerByteRate]; m.OK {
		t.Fatalf("quota before any is set: %+v", m)
	}
	q.SetTable(quota.NewTable(map[quota.Entity]quota.Limits{
		{User: quota.Named("alice")}:     alice,
		{User: quota.Named("ANONYMOUS")}: dflt,
	}))
	if m := c.quotas(q, "app")[quota.ProducerByteRate]; m.Limit != 7 || m.Key.User != "ANONYMOUS" {
		t.Fatalf("anonymous connection after the table changed: %+v", m)
	}
	c.info.SetPrincipal(principal.Principal{Type: "User", Name: "alice"})
	if m := c.quotas(q, "app")[quota.ProducerByteRate]; m.Limit != 100 || m.Key.User != "alice" {
		t.Fatalf("after authenticating as alice: %+v", m)
	}
}

// TestMuteHoldsNextRequest: a throttle holds the reader for about its
// length, a longer one wins over a shorter, and a closed connection ends
// the wait.
func TestMuteHoldsNextRequest(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &clientConn{ctx: ctx}
	if err := c.waitMuted(); err != nil {
		t.Fatalf("unmuted connection waited: %v", err)
	}
	c.mute(60 * time.Millisecond)
	c.mute(10 * time.Millisecond) // shorter: ignored
	start := time.Now()
	if err := c.waitMuted(); err != nil {
		t.Fatal(err)
	}
	if held := time.Since(start); held < 50*time.Millisecond {
		t.Fatalf("held %v, want about 60ms", held)
	}
	c.mute(time.Hour)
	cancel(errConnClosed)
	if err := c.waitMuted(); err != errConnClosed {
		t.Fatalf("closed connection: wait returned %v", err)
	}
}
