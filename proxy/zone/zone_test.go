package zone

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	ranges, err := ParseRanges("10.0.0.0/16=a, 10.1.0.0/16=b,fd00::/8=c")
	if err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Ranges: ranges, Own: "p"}
	bare := &Resolver{}
	cases := []struct {
		name           string
		r              *Resolver
		rack, id, addr string
		want           string
		src            Source
	}{
		{"rack first", r, "x", "zone=y", "10.0.0.1", "x", Rack},
		{"bufstream token", r, "", "zone=y,app", "10.0.0.1", "y", ClientID},
		{"warpstream token after others", r, "", "app, ws_az=us-east-1a", "", "us-east-1a", ClientID},
		{"warpstream long token", r, "", "warpstream_az=w", "", "w", ClientID},
		{"inkless token", r, "", "svc,diskless_az=d", "", "d", ClientID},
		{"empty token value is no zone", r, "", "zone=", "10.1.2.3", "b", Address},
		{"token must start the item", r, "", "myzone=q", "10.0.9.9", "a", Address},
		{"v4-mapped address", r, "", "", "::ffff:10.1.0.7", "b", Address},
		{"v6 range", r, "", "", "fd12::1", "c", Address},
		{"no range holds it: the proxy's zone", r, "", "app", "192.168.1.1", "p", Proxy},
		{"bad address: the proxy's zone", r, "", "", "nope", "p", Proxy},
		{"nothing known", bare, "", "app", "10.0.0.1", "", None},
	}
	for _, c := range cases {
		z, src := c.r.Of(c.rack, c.id, c.addr)
		if z != c.want || src != c.src {
			t.Errorf("%s: zone %q from %v, want %q from %v", c.name, z, src, c.want, c.src)
		}
	}
}

func TestParseRanges(t *testing.T) {
	for _, c := range []struct{ spec, err string }{
		{"", ""}, {"10.0.0.0/8=a", ""}, {"10.0.0.0/8", "want CIDR=ZONE"}, {"10.0.0.0/8=", "want CIDR=ZONE"}, {"10.0.0.0=a", "no '/'"},
	} {
		_, err := ParseRanges(c.spec)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseRanges(%q) = %v, want error containing %q", c.spec, err, c.err)
		}
	}
}

// Of runs on every request: it must not allocate.
func TestOfAllocs(t *testing.T) {
	ranges, _ := ParseRanges("10.0.0.0/16=a")
	r := &Resolver{Ranges: ranges}
	if n := testing.AllocsPerRun(100, func() { r.Of("", "app,other=1", "10.0.3.4") }); n != 0 {
		t.Fatalf("Of allocates %v times per call", n)
	}
}
