package schema

import (
	"strings"
	"testing"

	"github.com/kproxy/kproxy/layout"
)

func TestParseRoundTrip(t *testing.T) {
	s := New(layout.New("/kp/"))
	tests := []struct {
		name string
		key  string
		want Key
	}{
		{"state", s.PartitionStateKey("orders", 3), Key{Kind: KindPartitionState, Topic: "orders", Partition: 3}},
		{"segment", s.SegmentKey("orders", 3, 1234), Key{Kind: KindSegment, Topic: "orders", Partition: 3, Base: 1234}},
		{"bad log key", s.LogPrefix() + "t/0/nope", Key{}},
		{"bad partition", s.LogPrefix() + "t/x/state", Key{}},
		{"bad segment base", s.LogPrefix() + "t/0/seg/x", Key{}},
		{"meta key", layout.New("/kp").OwnerKey("t", 0), Key{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Parse(tt.key); got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.key, got, tt.want)
			}
		})
	}
}

func TestSegmentKeysSortByOffset(t *testing.T) {
	s := New(layout.New(""))
	if a, b := s.SegmentKey("t", 0, 9), s.SegmentKey("t", 0, 10); a >= b {
		t.Fatalf("segment keys do not sort by offset: %q >= %q", a, b)
	}
}

func TestMetaExcludesPerCommitKeys(t *testing.T) {
	l := layout.New("")
	s := New(l)
	for _, k := range []string{s.PartitionStateKey("t", 0), s.SegmentKey("t", 0, 0), s.GroupStateKey("g"), s.ProducerIDKey()} {
		if strings.HasPrefix(k, l.MetaPrefix()) {
			t.Fatalf("%q is under the meta prefix: proxies would get an event per commit", k)
		}
		if !strings.HasPrefix(k, l.Prefix()+"/") {
			t.Fatalf("%q is outside the layout's root prefix", k)
		}
	}
}
