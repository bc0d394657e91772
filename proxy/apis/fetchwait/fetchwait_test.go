package fetchwait

import "testing"

func TestSubWait(t *testing.T) {
	for _, c := range []struct {
		name                string
		remaining, minBytes int32
		parts               int
		known               bool
		want                int32
	}{
		{"data known, any byte: no wait", 5000, 1, 4, true, 0},
		{"MinBytes 0 counts as one byte", 5000, 0, 4, true, 0},
		{"nothing known: divided", 5000, 1, 4, false, 1250},
		{"MinBytes above one byte: divided", 5000, 1024, 4, true, 1250},
		{"one partition: the whole wait", 5000, 1, 1, false, 5000},
		{"more partitions than ms: 1 ms each", 10, 1, 100, false, 1},
		{"no time left", 0, 1, 4, false, 0},
		{"negative left", -5, 1, 4, true, 0},
	} {
		if got := SubWait(c.remaining, c.minBytes, c.parts, c.known); got != c.want {
			t.Errorf("%s: SubWait(%d, %d, %d, %v) = %d, want %d", c.name, c.remaining, c.minBytes, c.parts, c.known, got, c.want)
		}
	}
}
