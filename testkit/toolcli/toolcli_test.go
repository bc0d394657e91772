package toolcli

import (
	"flag"
	"testing"
)

func TestCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "make bench"},
		{[]string{"-docs", "docs/benchmarks.md"}, "make bench"},
		{[]string{"--docs=docs/benchmarks.md"}, "make bench"},
		{[]string{"-docs", "docs/benchmarks.md", "-rounds", "3"}, "go run ./bench/cmd/benchrun -docs docs/benchmarks.md -rounds 3"},
		{[]string{"-only=produce-1k"}, "go run ./bench/cmd/benchrun -only=produce-1k"},
	}
	for _, tt := range tests {
		if got := Command("make bench", "./bench/cmd/benchrun", tt.args); got != tt.want {
			t.Errorf("Command(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// With default flags a tool is given no page: it writes nothing.
func TestDocsFlagDefaultsToNothing(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	docs := DocsFlag(fs, "the report", "make bench")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *docs != "" {
		t.Fatalf("-docs defaults to %q, want nothing", *docs)
	}
	if err := fs.Parse([]string{"-docs", "docs/x.md"}); err != nil || *docs != "docs/x.md" {
		t.Fatalf("-docs docs/x.md gave %q, %v", *docs, err)
	}
}
