package commalist

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a", []string{"a"}},
		{" a, b ,,c ", []string{"a", "b", "c"}},
		{"PLAINTEXT://:9092,SSL://:9093", []string{"PLAINTEXT://:9092", "SSL://:9093"}},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
