package upstream

import (
	"context"
	"testing"
)

// TestApiVersionsFromHandshake: the versions a broker advertised come from
// the connection's own handshake; asking for them sends nothing more.
func TestApiVersionsFromHandshake(t *testing.T) {
	fb := newFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, _ := newTestPool(t, Config{ConnsPerBroker: 1}, res)
	for range 2 {
		keys, err := p.ApiVersions(context.Background(), 1)
		if err != nil || len(keys) != 1 || keys[0].ApiKey != 3 || keys[0].MaxVersion != 12 {
			t.Fatalf("ApiVersions: %+v, %v", keys, err)
		}
	}
	if n := len(fb.hellos); n != 1 {
		t.Fatalf("%d ApiVersions requests, want the one handshake", n)
	}
	res.del(1)
	if _, err := p.ApiVersions(context.Background(), 1); err == nil {
		t.Fatal("ApiVersions of a broker that left: want an error")
	}
}
