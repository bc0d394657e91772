package authz

import (
	"fmt"
	"testing"
)

// thousandBindings is 1,000 bindings over 100 principals: literal topics,
// prefixes, groups and a few wildcards, the shape of a busy cluster.
func thousandBindings() []Binding {
	var bs []Binding
	for u := range 100 {
		p := fmt.Sprintf("User:u%d", u)
		for i := range 6 {
			bs = append(bs, bind(topicT, literal, fmt.Sprintf("t-%d-%d", u, i), p, "*", opWrite, allow))
		}
		bs = append(bs, bind(topicT, prefixed, fmt.Sprintf("p-%d-", u), p, "*", opRead, allow))
		bs = append(bs, bind(topicT, prefixed, fmt.Sprintf("p-%d-secret", u), p, "*", opRead, deny))
		bs = append(bs, bind(groupT, literal, fmt.Sprintf("g-%d", u), p, "*", opRead, allow))
		bs = append(bs, bind(topicT, literal, "*", p, "10.0.0.1", opDesc, allow))
	}
	return bs
}

func BenchmarkDecision1000(b *testing.B) {
	a := New(Config{Mode: DenyByDefault})
	a.Update(thousandBindings())
	if n := len(a.Bindings()); n != 1000 {
		b.Fatalf("%d bindings", n)
	}
	b.Run("uncached", func(b *testing.B) {
		q := &Query{Principal: "User:u42", Host: "127.0.0.1", Operation: opRead, Resource: topicT, Name: "p-42-orders"}
		b.ReportAllocs()
		for b.Loop() {
			if !a.Authorize(q).Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		s := a.Session("User:u42", "127.0.0.1", "PLAINTEXT")
		s.Authorize(opWrite, topicT, "t-42-3")
		b.ReportAllocs()
		for b.Loop() {
			if d, _ := s.Authorize(opWrite, topicT, "t-42-3"); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
}

func TestCachedDecisionDoesNotAllocate(t *testing.T) {
	a := New(Config{Mode: DenyByDefault})
	a.Update(thousandBindings())
	s := a.Session("User:u42", "127.0.0.1", "PLAINTEXT")
	s.Authorize(opWrite, topicT, "t-42-3")
	if n := testing.AllocsPerRun(100, func() { s.Authorize(opWrite, topicT, "t-42-3") }); n != 0 {
		t.Fatalf("a cached decision allocates %.1f times", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		a.Authorize(&Query{Principal: "User:u42", Host: "h", Operation: opRead, Resource: topicT, Name: "p-42-x"})
	}); n != 0 {
		t.Fatalf("an uncached decision allocates %.1f times", n)
	}
}
